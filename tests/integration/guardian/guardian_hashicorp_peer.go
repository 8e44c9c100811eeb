// hashicorp/yamux peers for the wire-compatibility tests of calico.guardian.
//
// Default mode: listen on 127.0.0.1 (port printed first), serve one connection as a yamux
// server with keepalive on, echo every stream the client opens, open one stream carrying
// 1 MiB, expect the byte count back as text, close it, ping, and exit once the client closes
// the session.
//
// "voltron" mode (args: server.crt server.key client-ca.pem stream-ca.pem stream-name path):
// play the management cluster as upstream's Voltron does, in Go: mTLS server, yamux server
// session, Go's own HTTP/2 client over TLS over a yamux stream for one GET, and an echo for
// streams guardian opens.
package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/hashicorp/yamux"
)

func fail(format string, args ...interface{}) {
	fmt.Printf("GO-FAIL "+format+"\n", args...)
	os.Exit(1)
}

func voltron(args []string) {
	cert, err := tls.LoadX509KeyPair(args[0], args[1])
	if err != nil {
		fail("keypair: %v", err)
	}
	clientCA, streamCA := x509.NewCertPool(), x509.NewCertPool()
	for pool, path := range map[*x509.CertPool]string{clientCA: args[2], streamCA: args[3]} {
		pem, err := os.ReadFile(path)
		if err != nil || !pool.AppendCertsFromPEM(pem) {
			fail("ca %s: %v", path, err)
		}
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{
		Certificates: []tls.Certificate{cert},
		ClientCAs:    clientCA,
		ClientAuth:   tls.RequireAndVerifyClientCert,
	})
	if err != nil {
		fail("listen: %v", err)
	}
	fmt.Println(ln.Addr().(*net.TCPAddr).Port)
	conn, err := ln.Accept()
	if err != nil {
		fail("accept: %v", err)
	}
	if err := conn.(*tls.Conn).Handshake(); err != nil {
		fail("handshake: %v", err)
	}
	fmt.Printf("GO-CLIENT %s\n", conn.(*tls.Conn).ConnectionState().PeerCertificates[0].Subject.CommonName)
	session, err := yamux.Server(conn, yamux.DefaultConfig())
	if err != nil {
		fail("server: %v", err)
	}
	go func() {
		for {
			s, err := session.Accept()
			if err != nil {
				return
			}
			go func() {
				buf := make([]byte, 5)
				if _, err := io.ReadFull(s, buf); err != nil {
					return
				}
				s.Write(append([]byte("echo:"), buf...))
				s.Close()
			}()
		}
	}()
	transport := &http.Transport{
		ForceAttemptHTTP2: true,
		DialTLSContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			stream, err := session.Open()
			if err != nil {
				return nil, err
			}
			c := tls.Client(stream, &tls.Config{
				RootCAs: streamCA, ServerName: args[4], NextProtos: []string{"h2"},
			})
			return c, c.HandshakeContext(ctx)
		},
	}
	client := &http.Client{Transport: transport, Timeout: 20 * time.Second}
	for _, path := range []string{args[5], "/nowhere"} {
		resp, err := client.Get("https://" + args[4] + path)
		if err != nil {
			fail("get: %v", err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Printf("GO-HTTP %s %d %s hsts=%q body=%q\n", path, resp.StatusCode, resp.Proto,
			resp.Header.Get("Strict-Transport-Security"), body)
	}
	select {
	case <-session.CloseChan():
		fmt.Println("GO-DONE")
	case <-time.After(60 * time.Second):
		fail("session not closed by guardian")
	}
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "voltron" {
		voltron(os.Args[2:])
		return
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fail("listen: %v", err)
	}
	fmt.Println(ln.Addr().(*net.TCPAddr).Port)
	conn, err := ln.Accept()
	if err != nil {
		fail("accept: %v", err)
	}
	cfg := yamux.DefaultConfig()
	cfg.EnableKeepAlive = true
	cfg.KeepAliveInterval = 100 * time.Millisecond
	cfg.LogOutput = os.Stderr
	session, err := yamux.Server(conn, cfg)
	if err != nil {
		fail("server: %v", err)
	}
	go func() {
		for {
			s, err := session.Accept()
			if err != nil {
				return
			}
			go func() {
				n, err := io.Copy(s, s)
				fmt.Printf("GO-ECHO %d %v\n", n, err)
				s.Close()
			}()
		}
	}()

	payload := make([]byte, 1<<20)
	for i := range payload {
		payload[i] = byte(i % 251)
	}
	s, err := session.Open()
	if err != nil {
		fail("open: %v", err)
	}
	if _, err := s.Write(payload); err != nil {
		fail("write: %v", err)
	}
	// This hashicorp version returns EOF from Read once the stream is locally closed, so
	// read the fixed-size reply before closing.
	want := []byte(fmt.Sprint(len(payload)))
	reply := make([]byte, len(want))
	if _, err := io.ReadFull(s, reply); err != nil {
		fail("read reply: %v", err)
	}
	if !bytes.Equal(reply, want) {
		fail("reply %q", reply)
	}
	s.Close()
	fmt.Println("GO-OPEN-OK")
	if _, err := session.Ping(); err != nil {
		fail("ping: %v", err)
	}
	fmt.Println("GO-PING-OK")
	select {
	case <-session.CloseChan():
		fmt.Println("GO-DONE")
	case <-time.After(30 * time.Second):
		fail("session not closed by the client")
	}
}
