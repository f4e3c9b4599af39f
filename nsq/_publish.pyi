# Type stubs for the compiled publish path nsq._publish (same API as nsq._publish_py).
from typing import Any, Callable

BATCH_MAX_COUNT: int

class Waiter:
    callback: Callable[[Any, Any], None] | None
    event: Any
    result: Any
    deadline: float
    def __init__(self, callback: Callable[[Any, Any], None] | None = ..., event: Any = ..., deadline: float = ...) -> None: ...
    def resolve(self, source: Any, result: Any) -> None: ...

class TopicLane:
    conn: Any
    topic: str
    busy: bool
    max_bytes: int
    def __init__(self, conn: Any, topic: str, max_bytes: int, lock: Any = ...) -> None: ...
    def pending_batches(self) -> int: ...
    def publish(self, body: bytes | bytearray | memoryview, waiter: Any) -> None: ...
    def next_batch(self) -> None: ...

class LaneAnswer:
    callback: Callable[[Any, Any], None] | None
    event: Any
    result: Any
    deadline: float
    lane: TopicLane
    waiters: Any
    def __init__(self, lane: TopicLane, waiters: Any) -> None: ...
    def resolve(self, source: Any, result: Any) -> None: ...

class Publisher:
    backend: Any
    conns: list[Any]
    blocking: set[Any]
    callback_tasks: set[int]
    publish_timeout: float
    retry_publish: bool
    max_msg_size: int
    max_bytes: int
    round_robin: Any
    def __init__(
        self,
        backend: Any,
        *,
        pick: Callable[[Any, float], Any],
        counts_for: Callable[[str], Any],
        in_this_process: Callable[[], None],
        elsewhere: Callable[[Any, Any, Any], bytes],
        callback_tasks: set[int],
        blocking: set[Any],
        round_robin: Any,
        publish_timeout: float,
        retry_publish: bool,
        max_msg_size: int,
        max_bytes: int,
    ) -> None: ...
    def lane(self, conn: Any, topic: str) -> TopicLane: ...
    def send_to_lane(self, conn: Any, waiter: Any, topic_and_body: tuple[str, Any]) -> None: ...
    def lane_busy(self, conn: Any) -> bool: ...
    def forget(self, conn: Any) -> None: ...
    def reset(self) -> None: ...
    def pub(self, topic: Any, body: Any) -> bytes: ...

def lane_lock(backend: Any) -> Any: ...
