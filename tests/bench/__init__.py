"""The tests of ``minitask bench`` (``minitask/bench/``): each of its row sets runs end
to end on small sizes against a redis-server the suite starts, and leaves no key."""
