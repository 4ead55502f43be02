"""NativeResource: the lifetime every wrapper of a native handle shares (close, `with`, GC)."""


class NativeResource:
    """Subclasses keep their handle in self._handle and free it in _destroy(handle)."""

    _handle = None

    def _destroy(self, handle):
        raise NotImplementedError

    def close(self):
        """Releases the native handle; later calls do nothing."""
        if self._handle is not None:
            h, self._handle = self._handle, None
            self._destroy(h)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:  # interpreter shutdown: the native module may already be gone
            pass
