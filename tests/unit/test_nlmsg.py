"""``calico.nlmsg``: the one netlink reply walk, on random message streams (hypothesis),
and the two senders wired to it (``nlbatch.BatchWriter``, ``nftables.netlink``) over a
datagram socket pair standing in for the kernel."""

from __future__ import annotations

import errno
import itertools
import os
import socket
import struct
import threading
from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from calico import nlmsg
from calico.felix import nlbatch as nb
from calico.felix.nftables import netlink as nft
from calico.nlmsg import NLM_F_MULTI, NLMSG_DONE, NLMSG_ERROR, Message, error_code

DATA_TYPES = (16, 24, 28, 0x0A0C)


def error_body(code: int, tail: bytes = b"") -> bytes:
    return struct.pack("=i", -code) + tail


def msg(msg_type: int, flags: int, seq: int, body: bytes) -> Message:
    return (msg_type, flags, seq, body)


def frame(m: Message) -> bytes:
    raw = nlmsg.message(*m)
    return raw + b"\0" * (-len(raw) % 4)


@st.composite
def messages(draw: st.DrawFn, seqs: tuple[int, ...] = (1, 2, 3, 4)) -> Message:
    kind = draw(st.sampled_from(("data", "error", "ack", "done")))
    seq = draw(st.sampled_from(seqs))
    flags = draw(st.integers(0, 0xFFFF))
    if kind == "data":
        mtype, body = draw(st.sampled_from(DATA_TYPES)), draw(st.binary(max_size=41))
    elif kind == "done":
        mtype, body = NLMSG_DONE, b"\0" * 4
    else:
        code = 0 if kind == "ack" else draw(st.sampled_from((errno.ENOENT, errno.EEXIST, 999)))
        mtype, body = NLMSG_ERROR, error_body(code, draw(st.binary(max_size=20)))
    return msg(mtype, flags, seq, body)


streams = st.lists(messages(), max_size=30)


@st.composite
def grouped(draw: st.DrawFn) -> tuple[list[Message], list[bytes]]:
    """A stream and its frames joined into datagrams at random message boundaries."""
    msgs = draw(streams)
    cuts = sorted(draw(st.sets(st.integers(0, len(msgs)))) | {0, len(msgs)})
    dgrams = [b"".join(frame(m) for m in msgs[a:b]) for a, b in itertools.pairwise(cuts)]
    return msgs, dgrams


def walk(dgrams: list[bytes]) -> Iterator[Message]:
    for d in dgrams:
        yield from nlmsg.split(d)


@settings(max_examples=300, deadline=None)
@given(grouped())
def test_split_gives_back_every_message_however_they_are_grouped(case) -> None:
    msgs, dgrams = case
    assert list(walk(dgrams)) == msgs


@settings(max_examples=300, deadline=None)
@given(streams, st.data())
def test_a_truncated_datagram_ends_with_the_body_there_is(msgs, data) -> None:
    whole = b"".join(frame(m) for m in msgs)
    cut = data.draw(st.integers(0, len(whole)))
    want, off = [], 0
    for m in msgs:  # a header that is all there is given with its body cut short
        if off + nlmsg.HDR.size > cut:
            break
        want.append(msg(*m[:3], m[3][: max(0, cut - off - nlmsg.HDR.size)]))
        off += len(frame(m))
    assert list(nlmsg.split(whole[:cut])) == want


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_split_never_raises_and_never_reads_past_the_buffer(raw) -> None:
    total = 0
    for _type, _flags, _seq, body in nlmsg.split(raw):
        total += nlmsg.HDR.size + len(body)
        assert isinstance(error_code(body), int)
    assert total <= len(raw)


def test_a_header_shorter_than_itself_ends_the_walk() -> None:
    good = frame(msg(24, 0, 1, b"abcd"))
    bogus = struct.pack("=IHHII", 8, 24, 0, 2, 0)
    assert list(nlmsg.split(good + bogus + good)) == [msg(24, 0, 1, b"abcd")]
    assert list(nlmsg.split(good[:15])) == []


@settings(max_examples=300, deadline=None)
@given(grouped())
def test_strict_split_agrees_on_well_formed_datagrams(case) -> None:
    msgs, dgrams = case
    assert [m for d in dgrams for m in nlmsg.split(d, strict=True)] == msgs


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_strict_split_raises_exactly_where_the_lenient_walk_stops_short(raw) -> None:
    """Strict mode either gives what the lenient walk gives, or raises because the lenient walk
    met a bogus or cut-off length (it then stopped early or gave a short body)."""
    lenient = nlmsg.split(raw)
    try:
        strict = nlmsg.split(raw, strict=True)
    except ValueError as exc:
        assert str(exc).startswith("malformed netlink message at offset ")
        off = sum((nlmsg.HDR.size + len(b) + 3) & ~3 for *_, b in lenient[:-1])
        if lenient:  # the lenient walk gave the last message cut short, or stopped there
            (length,) = struct.unpack_from("=I", raw, off)
            cut = length != nlmsg.HDR.size + len(lenient[-1][3])
            assert cut or len(raw) - off - ((length + 3) & ~3) >= nlmsg.HDR.size
        return
    assert strict == lenient
    off = 0
    for *_, body in strict:  # every message given whole, as its header says
        (length,) = struct.unpack_from("=I", raw, off)
        assert length == nlmsg.HDR.size + len(body)
        off += (length + 3) & ~3
    assert len(raw) - off < nlmsg.HDR.size  # only a tail too short for a header is left


def test_strict_split_names_the_bad_message() -> None:
    good = frame(msg(24, 0, 1, b"abcd"))
    bogus = struct.pack("=IHHII", 8, 24, 0, 2, 0)
    with pytest.raises(ValueError, match=r"at offset 20 \(length 8\)"):
        nlmsg.split(good + bogus, strict=True)
    with pytest.raises(ValueError, match=r"at offset 0 \(length 20\)"):
        nlmsg.split(good[:19], strict=True)
    assert nlmsg.split(good[:15], strict=True) == []  # no whole header: nothing to frame


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 0x3FFF), st.binary(max_size=40)), max_size=8),
       st.binary(max_size=8))  # fmt: skip
def test_attrs_lenient_and_strict_from_an_offset(items, head) -> None:
    data = head + b"".join(nlmsg.attr(kind, payload) for kind, payload in items)
    expected = dict(items)
    assert nlmsg.parse_attrs(data, len(head)) == expected
    assert nlmsg.parse_attrs(data, len(head), strict=True) == expected


def test_attrs_strict_mode_refuses_what_the_lenient_walk_cuts() -> None:
    good = nlmsg.attr(3, b"eth0")
    long = struct.pack("=HH", 12, 4) + b"ab"
    assert nlmsg.parse_attrs(b"xx" + good + long, 2) == {3: b"eth0", 4: b"ab"}
    with pytest.raises(ValueError, match=r"malformed rtattr at offset 8 \(length 12\)"):
        nlmsg.parse_attrs(b"xx" + good + long, 2, strict=True)
    short = struct.pack("=HH", 3, 4)
    assert nlmsg.parse_attrs(good + short + good) == {3: b"eth0"}
    with pytest.raises(ValueError, match=r"offset 8 \(length 3\)"):
        nlmsg.parse_attrs(good + short, strict=True)


def test_error_codes_and_a_cut_off_code() -> None:
    assert error_code(error_body(errno.ENOENT)) == errno.ENOENT
    assert error_code(error_body(0, b"x" * 16)) == 0
    assert error_code(b"\xff\xff") == errno.EPROTO


def dump_model(msgs: list[Message], seq: int) -> tuple[list[tuple[int, bytes]], int | None]:
    """What a dump of ``seq`` should give: ((type, body) replies, errno raised or None)."""
    out: list[tuple[int, bytes]] = []
    for msg_type, flags, mseq, body in msgs:
        if mseq != seq:
            continue
        if msg_type == NLMSG_DONE:
            return out, None
        if msg_type == NLMSG_ERROR:
            if error_code(body):
                return out, error_code(body)
            continue
        out.append((msg_type, body))
        if not flags & NLM_F_MULTI:
            return out, None
    return out, None  # the stream ran out (a socket would then time out)


@settings(max_examples=400, deadline=None)
@given(grouped(), st.sampled_from((1, 2, 3, 4)))
def test_dump_replies_stop_at_done_raise_on_error_and_skip_other_seqs(case, seq) -> None:
    msgs, dgrams = case
    want, code = dump_model(msgs, seq)
    if code is None:
        assert nlmsg.dump_replies(dgrams, seq, "dump things") == want
    else:
        with pytest.raises(OSError) as e:
            nlmsg.dump_replies(dgrams, seq, "dump things")
        assert (e.value.errno, str(e.value)) == (
            code,
            f"[Errno {code}] dump things: {os.strerror(code)}",
        )


@settings(max_examples=400, deadline=None)
@given(grouped(), st.sets(st.sampled_from((1, 2, 3, 4, 5))))
def test_refusals_give_each_pending_seqs_first_error_in_arrival_order(case, seqs) -> None:
    msgs, dgrams = case
    want, pending = [], set(seqs)
    for msg_type, _flags, mseq, body in msgs:
        if not pending:
            break
        if msg_type == NLMSG_ERROR and mseq in pending:
            pending.discard(mseq)
            if error_code(body):
                want.append((mseq, error_code(body)))
    assert list(nlmsg.refusals(dgrams, seqs)) == want


@settings(max_examples=400, deadline=None)
@given(grouped(), st.sampled_from((2, 3, 4, 5)), st.sampled_from((2, 3, 4, 5)))
def test_batch_refusal_is_the_first_error_in_range_or_the_last_ack(case, first, last) -> None:
    msgs, dgrams = case
    want: tuple[int, int] | None = None
    for msg_type, _flags, mseq, body in msgs:
        if msg_type == NLMSG_ERROR and first - 1 <= mseq <= last:
            if error_code(body):
                want = (mseq, error_code(body))
                break
            if mseq == last:
                break
    # A stream that ends without the answer is a timeout in real use; here, None too.
    assert nlmsg.batch_refusal(dgrams, first, last) == want


def test_batch_refusal_stops_at_its_answer_and_times_out_with_one_due(pair) -> None:
    stream = iter([ack(3) + ack(9, errno.EEXIST) + ack(4), ack(5)])
    assert nlmsg.batch_refusal(stream, 3, 4) is None  # 3's ack (not asked) and 9 skipped
    assert next(stream) == ack(5)
    stream = iter([ack(2, errno.ENOMEM), ack(4)])  # the batch begin (seq first - 1) refused
    assert nlmsg.batch_refusal(stream, 3, 4) == (2, errno.ENOMEM)
    assert next(stream) == ack(4)
    a, b = pair
    b.send(ack(3))
    with pytest.raises(nlmsg.AckTimeout) as e:
        nlmsg.batch_refusal(nlmsg.receive(a, 0.01), 3, 4)
    assert e.value.missing == 1


def test_answers_stop_reading_at_the_datagram_that_ends_them() -> None:
    done, late = frame(msg(NLMSG_DONE, NLM_F_MULTI, 1, bytes(4))), frame(msg(24, 0, 1, b"x"))
    stream = iter([frame(msg(24, NLM_F_MULTI, 1, b"a")) + done + late, late])
    assert nlmsg.dump_replies(stream, 1, "d") == [(24, b"a")]
    assert next(stream) == late  # left for whoever reads next
    stream = iter([ack(2) + ack(1, errno.EEXIST), ack(3)])
    assert list(nlmsg.refusals(stream, [1, 2])) == [(1, errno.EEXIST)]
    assert next(stream) == ack(3)
    assert list(nlmsg.refusals(iter(()), [])) == []
    single = frame(msg(24, 0, 1, b"only")) + frame(msg(24, 0, 1, b"not this"))
    assert nlmsg.dump_replies([single], 1, "d") == [(24, b"only")]  # not NLM_F_MULTI


def test_a_receive_timeout_tells_how_many_acks_are_missing(pair) -> None:
    a, b = pair
    b.send(ack(1))
    with pytest.raises(nlmsg.AckTimeout) as e:
        list(nlmsg.refusals(nlmsg.receive(a, 0.01), [1, 2, 3]))
    assert (e.value.missing, e.value.errno) == (2, errno.ETIMEDOUT)
    assert str(e.value) == "[Errno 110] no netlink ack for 2 message(s)"


@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    yield a, b
    a.close()
    b.close()


@settings(max_examples=50, deadline=None)
@given(grouped())
def test_receive_reads_datagram_by_datagram_then_times_out(case) -> None:
    _msgs, dgrams = case
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    with a, b:
        for d in dgrams:
            b.send(d)
        it = nlmsg.receive(a, 0.01)
        assert [next(it) for _ in dgrams] == dgrams
        with pytest.raises(TimeoutError):
            next(it)


def test_receive_with_a_small_buffer_still_reads_an_error_code(pair) -> None:
    a, b = pair
    b.send(frame(msg(NLMSG_ERROR, 0, 7, error_body(errno.EEXIST, b"r" * 500))))
    ((_type, _flags, seq, body),) = nlmsg.split(next(nlmsg.receive(a, 1.0, bufsize=64)))
    assert (seq, error_code(body), len(body)) == (7, errno.EEXIST, 64 - 16)


# -- the senders over the socket pair --------------------------------------------------------


def ack(seq: int, code: int = 0) -> bytes:
    return frame(msg(NLMSG_ERROR, 0, seq, error_body(code, b"h" * 16)))


def writer_on(sock: socket.socket) -> nb.BatchWriter:
    w = nb.BatchWriter()
    w._sock = sock  # the kernel's side is the test's; seqs start at 1
    return w


def test_batch_writer_matches_acks_out_of_order_among_strangers(pair) -> None:
    a, b = pair
    reqs = [nb.route_delete(f"10.0.0.{i}/32") for i in range(3)]
    b.send(ack(3) + ack(99, errno.EEXIST) + ack(2, errno.ESRCH))  # seqs 1-3 are ours
    b.send(ack(2) + ack(1, errno.ENOENT))  # a repeat of 2 is not a second answer
    failures = writer_on(a).send(reqs)
    assert [(f.request, f.errno) for f in failures] == [
        (reqs[1], errno.ESRCH),
        (reqs[0], errno.ENOENT),
    ]
    sent = b.recv(1 << 16)
    assert [m[2] for m in nlmsg.split(sent)] == [1, 2, 3]


def test_batch_writer_fails_the_rest_on_a_missing_ack(pair, monkeypatch) -> None:
    a, b = pair
    monkeypatch.setattr(nb, "ACK_TIMEOUT", 0.01)
    b.send(ack(1))
    w = writer_on(a)
    reqs = [nb.route_delete("10.0.0.1/32"), nb.route_delete("10.0.0.2/32")]
    failures = w.send(reqs)
    assert [(f.request, f.errno) for f in failures] == [(r, errno.ETIMEDOUT) for r in reqs]
    assert w._sock is None  # dropped: a late ack must not answer the next batch


def test_batch_writer_dump_reads_multipart_replies_to_done(pair) -> None:
    a, b = pair
    multi = [msg(24, NLM_F_MULTI, 1, b"r%d" % i) for i in range(3)]
    b.send(frame(msg(24, NLM_F_MULTI, 77, b"late")) + frame(multi[0]))
    b.send(frame(multi[1]) + frame(multi[2]) + frame(msg(NLMSG_DONE, NLM_F_MULTI, 1, b"")))
    w = writer_on(a)
    assert w.dump(nb.route_dump_request(socket.AF_INET)) == [(24, b"r0"), (24, b"r1"), (24, b"r2")]
    (req,) = nlmsg.split(b.recv(1 << 16))
    assert req[:3] == (nb.RTM_GETROUTE, 0x301, 1)  # no ACK asked
    assert w._sock is a


def test_batch_writer_dump_error_and_timeout_drop_the_socket(pair, monkeypatch) -> None:
    a, b = pair
    b.send(frame(msg(24, NLM_F_MULTI, 1, b"r0")) + ack(1, errno.EOPNOTSUPP))
    w = writer_on(a)
    with pytest.raises(OSError, match="dump routes: Operation not supported") as e:
        w.dump(nb.route_dump_request(socket.AF_INET))
    assert e.value.errno == errno.EOPNOTSUPP and w._sock is None
    monkeypatch.setattr(nb, "ACK_TIMEOUT", 0.01)
    c, d = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    with c, d:
        w = writer_on(c)
        with pytest.raises(OSError, match="dump links: no reply") as e:
            w.dump(nb.link_dump_request())
        assert e.value.errno == errno.ETIMEDOUT and w._sock is None


def nft_batch(n: int) -> nft.ElementBatch:
    batch = nft.ElementBatch("inet", "calico")
    for i in range(n):
        batch.add(False, f"s{i}", nft.set_member_elems("10.0.0.1", "ipv4_addr", False))
    return batch


def kernel_answering(sock: socket.socket, reply) -> threading.Thread:
    """Reads the one batch the sender writes and sends ``reply(seqs)``'s datagrams."""

    def run() -> None:
        sent = nlmsg.split(sock.recv(1 << 20))
        for d in reply([m[2] for m in sent[1:-1]]):  # without batch begin and end
            sock.send(d)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


@pytest.mark.parametrize(
    ("reply", "want"),
    [
        (lambda s: [ack(s[1]) + ack(s[0]), ack(s[2])], None),
        (
            lambda s: [ack(s[0]) + ack(s[1], errno.ENOENT)],
            "adding elements of s1: No such file or directory (ENOENT)",
        ),
        (lambda s: [ack(s[0], 999)], f"adding elements of s0: {os.strerror(999)} (-999)"),
        (
            lambda s: [ack(s[0] - 1, errno.ENOMEM)],
            f"the batch: {os.strerror(errno.ENOMEM)} (ENOMEM)",
        ),
        # Only the last message asked for an ack: an error after another's ack still counts.
        (
            lambda s: [ack(s[0]), ack(s[2], errno.EEXIST)],
            "adding elements of s2: File exists (EEXIST)",
        ),
    ],
)
def test_nft_sender_reads_acks_through_the_shared_walk(pair, reply, want) -> None:
    a, b = pair
    sender = nft.NetlinkElements(timeout=10.0)
    sender._sock = a
    t = kernel_answering(b, reply)
    assert sender.send(nft_batch(3)) == want
    t.join(10)
    assert sender._sock is a


def test_nft_sender_drains_only_after_a_refused_batch(pair, monkeypatch) -> None:
    a, b = pair
    drained: list[int] = []
    real_drain = nft._drain
    monkeypatch.setattr(nft, "_drain", lambda sock: (drained.append(1), real_drain(sock)))
    sender = nft.NetlinkElements(timeout=10.0)
    sender._sock = a
    t = kernel_answering(b, lambda s: [ack(s[-1])])
    assert sender.send(nft_batch(3)) is None
    t.join(10)
    assert drained == []  # an answered batch leaves nothing behind
    # Refused at its first message: the last message's ack is still to come, unread.
    t = kernel_answering(b, lambda s: [ack(s[0], errno.ENOENT) + ack(s[-1])])
    assert sender.send(nft_batch(3)) == "adding elements of s0: No such file or directory (ENOENT)"
    t.join(10)
    t = kernel_answering(b, lambda s: [ack(s[-1])])
    assert sender.send(nft_batch(2)) is None
    t.join(10)
    assert drained == [1]
    t = kernel_answering(b, lambda s: [ack(s[-1])])
    assert sender.send(nft_batch(2)) is None
    t.join(10)
    assert drained == [1]


def test_nft_sender_times_out_with_the_count_still_missing(pair) -> None:
    a, b = pair
    sender = nft.NetlinkElements(timeout=0.05)
    sender._sock = a
    t = kernel_answering(b, lambda s: [ack(s[0])])
    assert sender.send(nft_batch(3)) == "no netlink ack for 1 message(s)"
    t.join(10)
    assert sender._sock is None  # closed: a late ack must not be read as the next batch's
