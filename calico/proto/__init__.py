"""Generated protobuf/gRPC modules (sources: the .proto files next to them)."""
