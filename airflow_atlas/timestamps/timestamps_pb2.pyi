from collections.abc import Iterable as _Iterable
from collections.abc import Mapping as _Mapping
from typing import ClassVar as _ClassVar

from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from google.protobuf.internal import containers as _containers

DESCRIPTOR: _descriptor.FileDescriptor

class FreshTimestampsRequest(_message.Message):
    __slots__ = ("store", "count")
    STORE_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    store: str
    count: int
    def __init__(self, store: str | None = ..., count: int | None = ...) -> None: ...

class FreshTimestampsResponse(_message.Message):
    __slots__ = ("start", "count", "epoch")
    START_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    start: int
    count: int
    epoch: int
    def __init__(self, start: int | None = ..., count: int | None = ..., epoch: int | None = ...) -> None: ...

class CurrentBoundRequest(_message.Message):
    __slots__ = ("store",)
    STORE_FIELD_NUMBER: _ClassVar[int]
    store: str
    def __init__(self, store: str | None = ...) -> None: ...

class CurrentBoundResponse(_message.Message):
    __slots__ = ("issued", "epoch")
    ISSUED_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    issued: int
    epoch: int
    def __init__(self, issued: int | None = ..., epoch: int | None = ...) -> None: ...

class DescribeRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class StoreState(_message.Message):
    __slots__ = ("store", "role", "epoch", "issued", "bound", "leader", "lease_remaining_seconds")
    STORE_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    ISSUED_FIELD_NUMBER: _ClassVar[int]
    BOUND_FIELD_NUMBER: _ClassVar[int]
    LEADER_FIELD_NUMBER: _ClassVar[int]
    LEASE_REMAINING_SECONDS_FIELD_NUMBER: _ClassVar[int]
    store: str
    role: str
    epoch: int
    issued: int
    bound: int
    leader: str
    lease_remaining_seconds: float
    def __init__(self, store: str | None = ..., role: str | None = ..., epoch: int | None = ..., issued: int | None = ..., bound: int | None = ..., leader: str | None = ..., lease_remaining_seconds: float | None = ...) -> None: ...

class DescribeResponse(_message.Message):
    __slots__ = ("server", "stores")
    SERVER_FIELD_NUMBER: _ClassVar[int]
    STORES_FIELD_NUMBER: _ClassVar[int]
    server: str
    stores: _containers.RepeatedCompositeFieldContainer[StoreState]
    def __init__(self, server: str | None = ..., stores: _Iterable[StoreState | _Mapping] | None = ...) -> None: ...
