"""A Loader under threads and pickle: a second thread's next() while the
first one's is under way is refused with a clear error (never another
batch's bytes, never a TypeError); pickling says what to pass instead."""

import pickle
import threading

import pytest

import stoker


def test_second_consumer_thread_is_refused(folder):
    # null engine with a latency: the first thread waits inside next() most of the time
    loader = stoker.Loader(folder, batch_size=4, shuffle=False, engine="null",
                           null_latency="20ms", index_cache=False)
    seen, errors, refused = [], [], []
    it = iter(loader)

    def first():
        try:
            for b in it:
                seen.extend(b.indices.tolist())
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    t = threading.Thread(target=first)
    t.start()
    try:
        while t.is_alive() and not refused:
            try:
                b = next(it)
                seen.extend(b.indices.tolist())
            except RuntimeError as e:
                refused.append(str(e))
            except StopIteration:
                break
    finally:
        t.join()
    assert not errors, errors
    assert refused, "a second thread's next() was never refused"
    assert "two threads at once" in refused[0] and "one consumer thread" in refused[0]
    # every sample once between the two threads: none lost, none twice
    assert sorted(seen) == list(range(loader.num_samples))
    loader.close()


def test_pickle_says_what_to_pass(folder):
    loader = stoker.Loader(folder, batch_size=4, seed=3)
    it = iter(loader)
    next(it)
    with pytest.raises(TypeError, match="cannot be pickled") as e:
        pickle.dumps(loader)
    assert "state_dict()" in str(e.value) and "loader.path" in str(e.value)
    # what it says works: path, options and the position make the same loader
    state = loader.state_dict()
    other = stoker.Loader(loader.path, batch_size=4, seed=3)
    other.load_state_dict(state)
    want = next(it).indices.tolist()
    assert next(iter(other)).indices.tolist() == want
    other.close()
    loader.close()
