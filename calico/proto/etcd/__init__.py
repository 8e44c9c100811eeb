"""etcd v3 API subset (``etcdserverpb``/``mvccpb``), generated from the .proto files here.

Regenerate from the repository root with::

    .venv/bin/python -m grpc_tools.protoc -I . --python_out=. --grpc_python_out=. --pyi_out=. \
        calico/proto/etcd/kv.proto calico/proto/etcd/rpc.proto
    rm -f calico/proto/etcd/kv_pb2_grpc.py
"""
