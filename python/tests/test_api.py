"""The API's checks and the disabled mode, in this (untraced) process."""
import asyncio
import os
import time

import pytest

if os.environ.get("SPANRING_SEGMENT"):
    pytest.skip("these tests need an untraced process", allow_module_level=True)

import spanring  # noqa: E402


@pytest.mark.parametrize("bad", ["", "a.b", "a b", "a=b", ".", " app", "app="])
def test_a_bad_producer_name_is_a_value_error(bad):
    with pytest.raises(ValueError):
        spanring.producer(bad)


@pytest.mark.parametrize("bad", [None, b"app", 7])
def test_a_producer_name_that_is_not_a_str_is_a_value_error_as_in_simpler_trace(bad):
    with pytest.raises(ValueError, match="must be a str"):
        spanring.producer(bad)


def test_a_good_producer_keeps_its_name():
    assert spanring.producer("pypto").name == "pypto"
    assert spanring.producer("my-lib_2").name == "my-lib_2"


@pytest.mark.parametrize("key", ["a b", "1x", "", "k=v", "a.b", "-"])
def test_an_attribute_key_that_is_not_an_identifier_is_a_value_error(key):
    with pytest.raises(ValueError, match="not an identifier"):
        spanring.span("step", **{key: 1})


@pytest.mark.parametrize("value", [None, [1], b"x", object(), 1j])
def test_an_attribute_value_of_another_type_is_a_type_error(value):
    with pytest.raises(TypeError):
        spanring.span("step", k=value)


def test_a_str_value_with_a_space_is_a_value_error():
    with pytest.raises(ValueError, match="space"):
        spanring.span("step", why="two words")


@pytest.mark.parametrize("bad", ["", None, 7, b"step"])
def test_a_bad_span_name_is_a_value_error_as_in_simpler_trace(bad):
    with pytest.raises(ValueError):
        spanring.span(bad)
    with pytest.raises(ValueError):
        spanring.producer("p").span(bad)


def test_a_span_takes_one_positional_name():
    with pytest.raises(TypeError):
        spanring.span("a", "b")


def test_untraced_enabled_is_false_and_a_span_does_nothing():
    assert spanring.enabled() is False
    assert spanring.producer("x").enabled() is False
    s = spanring.span("step", k=1, f=0.5, b=True, s="x")
    assert isinstance(s, spanring.NoopSpan)
    with s as entered:
        assert entered is s
    with pytest.raises(KeyError):  # exceptions pass through
        with spanring.span("step"):
            raise KeyError("x")


def test_untraced_a_decorator_returns_the_function_itself():
    def f(x):
        return x + 1

    async def g():
        return 2

    assert spanring.span("f")(f) is f
    assert spanring.producer("p").span("g", k=1)(g) is g
    assert f(1) == 2
    with pytest.raises(TypeError):
        spanring.span("f")(1)


def test_invocation_checks_its_ids():
    with spanring.invocation(42, 0x9F3C2A1B5D7E6F01):
        pass
    with spanring.invocation(2**64 - 1):
        pass
    for bad in (-1, 2**64):
        with pytest.raises(ValueError):
            spanring.invocation(bad, 0)
    with pytest.raises(TypeError):
        spanring.invocation("1", 0)


def test_now_ns_is_clock_monotonic():
    a = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
    n = spanring.now_ns()
    b = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
    assert a <= n <= b


def test_an_untraced_async_function_still_runs():
    @spanring.span("co")
    async def co():
        await asyncio.sleep(0)
        return 5

    assert asyncio.run(co()) == 5
