"""A bytes-bounded cache of arrays a process keeps between requests (packed postings, common terms' rows)."""

import threading
from collections import OrderedDict


class LeastRecentlyUsed:
    """Values by key, up to ``capacity`` bytes of them as ``cost`` counts; the least recently read go first.

    A value costing more than the whole capacity is not kept. Safe to share between threads.
    """

    def __init__(self, capacity: int, cost):
        self.capacity = capacity
        self.cost = cost
        self.lock = threading.RLock()  # a weak reference's callback may drop an entry while this thread holds it
        self.entries: OrderedDict = OrderedDict()
        self.size = 0

    def get(self, key):
        with self.lock:
            value = self.entries.get(key)
            if value is not None:
                self.entries.move_to_end(key)
            return value

    def put(self, key, value) -> None:
        cost = self.cost(value)
        if cost > self.capacity:
            return
        with self.lock:
            old = self.entries.pop(key, None)
            if old is not None:
                self.size -= self.cost(old)
            self.entries[key] = value
            self.size += cost
            while self.size > self.capacity:
                self.size -= self.cost(self.entries.popitem(last=False)[1])

    def drop(self, key) -> None:
        with self.lock:
            value = self.entries.pop(key, None)
            if value is not None:
                self.size -= self.cost(value)

    def clear(self) -> None:
        with self.lock:
            self.entries.clear()
            self.size = 0
