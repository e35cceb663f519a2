"""s3:// keys with a space, a '+', non-ASCII and every reserved character of
RFC 3986, in the prefix and in the shards' names: read and packed, each key
encoded the way SigV4 signs it (a '+' sent as is was a SignatureDoesNotMatch
that looked like bad credentials)."""

import os

import pytest

from test_remote import aws, data, read_all, reference, s3  # noqa: F401 (fixtures)
from test_remote_pack import pack

# every reserved character (RFC 3986: gen-delims and sub-delims), '%', a
# space, '+' and non-ASCII; '?', '*' and '[' stay out of the last element,
# where they would make a pattern
PREFIX = "we ird+:@!$&'()*,;=[]?#%\u00e9/sub dir/"


def test_a_prefix_and_names_with_reserved_characters_are_read(aws, s3, data, tmp_path,
                                                             reference):
    d, names = data
    s3.make_bucket("keys")
    for n in names:
        with open(d / "shards" / n, "rb") as f:
            s3.put("keys", PREFIX + "a+b c=" + n, f.read())
    got, rs, seen = read_all("s3://keys/" + PREFIX, cache_dir=str(tmp_path), seed=2)
    assert got == reference and set(seen.values()) == {1}
    assert rs["failed"] == 0


def test_pack_to_a_prefix_with_reserved_characters(aws, s3, data, tmp_path, reference):
    url = "s3://keys/packed " + PREFIX
    r = pack(data, url, tmp_path, env=dict(os.environ))
    assert r.returncode == 0, r.stderr
    got, rs, _ = read_all(url, cache_dir=str(tmp_path), remote_cache=False)
    assert sorted(got.values()) == sorted(reference.values())
