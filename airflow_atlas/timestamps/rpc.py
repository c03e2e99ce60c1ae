"""The timestamp server's gRPC service, bound with grpc's public API to the messages of timestamps.proto.

One home for the service's method paths, the status codes' meaning and the trailing metadata key that names a
leader, so that the server (:mod:`.server`) and the client (:mod:`.client`) cannot disagree.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import grpc
from google.protobuf.message import Message

from . import timestamps_pb2 as pb

SERVICE = "atlas.timestamps.v1.Timestamps"
LEADER_METADATA = "atlas-leader"
"""Trailing metadata of a FAILED_PRECONDITION answer: the address of the store's leader ("" if none)."""

_METHODS: dict[str, tuple[type[Message], type[Message]]] = {
    "FreshTimestamps": (pb.FreshTimestampsRequest, pb.FreshTimestampsResponse),
    "CurrentBound": (pb.CurrentBoundRequest, pb.CurrentBoundResponse),
    "Describe": (pb.DescribeRequest, pb.DescribeResponse),
}


def service_handler(implementations: dict[str, Callable[[Any, grpc.ServicerContext], Any]]) -> grpc.GenericRpcHandler:
    """The gRPC handler serving ``implementations`` (method name -> ``fn(request, context)``)."""
    handlers = {
        name: grpc.unary_unary_rpc_method_handler(
            implementations[name],
            request_deserializer=request.FromString,
            response_serializer=response.SerializeToString,
        )
        for name, (request, response) in _METHODS.items()
    }
    return grpc.method_handlers_generic_handler(SERVICE, handlers)


class TimestampsStub:
    """Client calls of the service on one channel."""

    def __init__(self, channel: grpc.Channel):
        def method(name: str) -> grpc.UnaryUnaryMultiCallable:
            request, response = _METHODS[name]
            return channel.unary_unary(
                f"/{SERVICE}/{name}",
                request_serializer=request.SerializeToString,
                response_deserializer=response.FromString,
            )

        self.FreshTimestamps = method("FreshTimestamps")
        self.CurrentBound = method("CurrentBound")
        self.Describe = method("Describe")
