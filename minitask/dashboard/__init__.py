"""The web dashboard and ``/metrics`` (``minitask dashboard``), behind the
``minitask[dashboard]`` extra: nothing here is imported by the rest of minitask."""
