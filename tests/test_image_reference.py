"""cleanrl_utils.image_reference: Docker's image reference grammar, normalisation and one-line refusals."""

import pytest

from cleanrl_utils.image_reference import ImageReference, parse_reference

SHA256 = "sha256:" + "0123456789abcdef" * 4
SHA512 = "sha512:" + "0123456789abcdef" * 8

VALID = {
    "ubuntu": ("docker.io", "library/ubuntu", "latest", None),
    "ubuntu:22.04": ("docker.io", "library/ubuntu", "22.04", None),
    "index.docker.io/ubuntu": ("docker.io", "library/ubuntu", "latest", None),
    "docker.io/library/python:3.11-slim-bookworm": ("docker.io", "library/python", "3.11-slim-bookworm", None),
    "org/cleanrl": ("docker.io", "org/cleanrl", "latest", None),
    "ghcr.io/org/cleanrl:cpu": ("ghcr.io", "org/cleanrl", "cpu", None),
    "localhost/cleanrl": ("localhost", "cleanrl", "latest", None),
    "localhost:5000/team/cleanrl:v1.2.3": ("localhost:5000", "team/cleanrl", "v1.2.3", None),
    "127.0.0.1:43121/cleanrl:test": ("127.0.0.1:43121", "cleanrl", "test", None),
    "[::1]:5000/cleanrl:x": ("[::1]:5000", "cleanrl", "x", None),
    "123456789012.dkr.ecr.us-east-1.amazonaws.com/cleanrl:cpu": (
        "123456789012.dkr.ecr.us-east-1.amazonaws.com",
        "cleanrl",
        "cpu",
        None,
    ),
    "Registry.Example.com/a/b/c": ("Registry.Example.com", "a/b/c", "latest", None),
    "my-registry/x": ("docker.io", "my-registry/x", "latest", None),
    "a__b/c---d/e.f/g_h": ("docker.io", "a__b/c---d/e.f/g_h", "latest", None),
    "x:_under.score-": ("docker.io", "library/x", "_under.score-", None),
    "x:" + "t" * 128: ("docker.io", "library/x", "t" * 128, None),
    f"cleanrl@{SHA256}": ("docker.io", "library/cleanrl", None, SHA256),
    f"ghcr.io/org/cleanrl:cpu@{SHA512}": ("ghcr.io", "org/cleanrl", "cpu", SHA512),
}

INVALID = [
    "",
    " ",
    "x;rm -rf /",
    "x;id",
    "$(id)",
    "cleanrl:$(id)",
    "`id`",
    "cleanrl:`id`",
    "x y",
    "cleanrl\n",
    "cleanrl\nid",
    "cleanrl\t",
    "clean\x00rl",
    "x&&id",
    "x|id",
    "x>out",
    "'quoted'",
    '"quoted"',
    "Uppercase",
    "org/CleanRL",
    "localhost/CleanRL",
    "-leading",
    "trailing-",
    "a..b",
    "a___b",
    "a/",
    "/a",
    "a//b",
    ":tag",
    "x:",
    "x:.dot",
    "x:-dash",
    "x:" + "t" * 129,
    "x:t@g",
    "x@",
    "x@sha256:abc",
    "x@sha256:" + "A" * 64,
    "x@sha256:" + "0" * 63,
    "x@sha256:" + "0" * 65,
    "x@md5:" + "0" * 32,
    "x@sha256",
    "bad_host:5000/x",
    "-host.com/x",
    "host.com:port/x",
    "ünïcode",
    "x:täg",
    "0123456789abcdef" * 4,
    "a/" + "b" * 260,
    "x:1:2",
]


@pytest.mark.parametrize("ref", sorted(VALID))
def test_valid_references_parse_and_normalise(ref):
    parsed = parse_reference(ref)
    assert isinstance(parsed, ImageReference)
    assert (parsed.domain, parsed.path, parsed.tag, parsed.digest) == VALID[ref]
    assert parsed.registry == parsed.domain and parsed.repository == parsed.path
    assert parsed.name == f"{parsed.domain}/{parsed.path}"
    # the normalised form is a fixed point
    assert parse_reference(str(parsed)) == parsed


def test_normalised_strings():
    assert str(parse_reference("ubuntu")) == "docker.io/library/ubuntu:latest"
    assert str(parse_reference("localhost:5000/x:1")) == "localhost:5000/x:1"
    assert str(parse_reference(f"x@{SHA256}")) == f"docker.io/library/x@{SHA256}"
    assert str(parse_reference(f"x:t@{SHA256}")) == f"docker.io/library/x:t@{SHA256}"


@pytest.mark.parametrize("ref", INVALID, ids=[repr(r)[:40] for r in INVALID])
def test_invalid_references_raise_one_line_value_errors(ref):
    with pytest.raises(ValueError) as error:
        parse_reference(ref)
    message = str(error.value)
    assert message and "\n" not in message


def test_messages_name_the_problem():
    cases = {
        "org/CleanRL": "lower-case",
        "x:" + "t" * 129: "tag",
        "x@sha256:abc": "digest",
        "x@md5:" + "0" * 32: "md5",
        "x;id": "';'",
        "a/" + "b" * 260: "255",
        "0123456789abcdef" * 4: "image ID",
    }
    for ref, fragment in cases.items():
        with pytest.raises(ValueError, match=fragment):
            parse_reference(ref)


def test_non_strings_are_refused():
    with pytest.raises(ValueError):
        parse_reference(None)  # type: ignore[arg-type]
