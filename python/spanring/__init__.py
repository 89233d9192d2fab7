"""spanring for Python: spans from Python code into a spanring segment (docs/python.md).

    import spanring
    with spanring.span("load", batch=16):       # ext.app.load batch=16
        ...
    p = spanring.producer("pypto")
    @p.span("decode_layer", layer=3)            # ext.pypto.decode_layer layer=3
    async def decode(): ...

Trace a program with `spanring run -- python3 app.py`. Outside `spanring run` (no
SPANRING_SEGMENT) `enabled()` is False and a span does nothing.

The hot path is C (spanring._spanring); this module only builds the decorator's wrapper, which
runs once per decorated function, not per span.
"""
import functools as _functools
import inspect as _inspect

from spanring._spanring import (NoopSpan, Producer, Span, _set_decorator, invocation,
                                now_ns)

__all__ = ["producer", "span", "enabled", "invocation", "now_ns", "Producer", "Span"]


def producer(name):
    """A producer whose spans are named ext.<name>.<span>.

    ValueError when name is not a str (None included), is empty, or holds a dot, space
    or '=': the exception simpler.trace raises for a bad producer name.
    """
    return Producer(name)


def _decorate(prod, name, attrs, func):
    # A new span per call: one span object may be open on several threads, or recursively.
    make = prod.span
    if _inspect.iscoroutinefunction(func):
        # Timed over the awaited body: the span opens when the coroutine starts running, not
        # when it is created, and closes when it returns.
        @_functools.wraps(func)
        async def traced(*args, **kwargs):
            with make(name, **attrs):
                return await func(*args, **kwargs)
    else:
        @_functools.wraps(func)
        def traced(*args, **kwargs):
            with make(name, **attrs):
                return func(*args, **kwargs)
    return traced


_set_decorator(_decorate)

_app = Producer("app")
#: span(name, **attrs) of the default producer `app` (spans named ext.app.<name>).
span = _app.span
#: enabled() of the default producer: True when this process is traced.
enabled = _app.enabled
