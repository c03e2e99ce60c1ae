from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class FreshTimestampsRequest(_message.Message):
    __slots__ = ("store", "count", "cluster")
    STORE_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_FIELD_NUMBER: _ClassVar[int]
    store: str
    count: int
    cluster: str
    def __init__(self, store: _Optional[str] = ..., count: _Optional[int] = ..., cluster: _Optional[str] = ...) -> None: ...

class FreshTimestampsResponse(_message.Message):
    __slots__ = ("start", "count", "epoch")
    START_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    start: int
    count: int
    epoch: int
    def __init__(self, start: _Optional[int] = ..., count: _Optional[int] = ..., epoch: _Optional[int] = ...) -> None: ...

class CurrentBoundRequest(_message.Message):
    __slots__ = ("store", "cluster")
    STORE_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_FIELD_NUMBER: _ClassVar[int]
    store: str
    cluster: str
    def __init__(self, store: _Optional[str] = ..., cluster: _Optional[str] = ...) -> None: ...

class CurrentBoundResponse(_message.Message):
    __slots__ = ("issued", "epoch")
    ISSUED_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    issued: int
    epoch: int
    def __init__(self, issued: _Optional[int] = ..., epoch: _Optional[int] = ...) -> None: ...

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
    def __init__(self, store: _Optional[str] = ..., role: _Optional[str] = ..., epoch: _Optional[int] = ..., issued: _Optional[int] = ..., bound: _Optional[int] = ..., leader: _Optional[str] = ..., lease_remaining_seconds: _Optional[float] = ...) -> None: ...

class DescribeResponse(_message.Message):
    __slots__ = ("server", "stores")
    SERVER_FIELD_NUMBER: _ClassVar[int]
    STORES_FIELD_NUMBER: _ClassVar[int]
    server: str
    stores: _containers.RepeatedCompositeFieldContainer[StoreState]
    def __init__(self, server: _Optional[str] = ..., stores: _Optional[_Iterable[_Union[StoreState, _Mapping]]] = ...) -> None: ...
