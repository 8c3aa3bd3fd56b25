"""The wire format: a message and an outcome as Python values and as bytes.

Pure code, no I/O: ``message`` holds the data classes and time conversions,
``serializer`` the msgpack envelope that producers in any language can write.
"""
