"""Container image references (`registry/path:tag@digest`): parsing, validation and normalisation.

    >>> ref = parse_reference("123456789012.dkr.ecr.us-east-1.amazonaws.com/cleanrl:cpu")
    >>> ref.domain, ref.path, ref.tag, ref.digest
    ('123456789012.dkr.ecr.us-east-1.amazonaws.com', 'cleanrl', 'cpu', None)
    >>> str(parse_reference("ubuntu"))
    'docker.io/library/ubuntu:latest'

The grammar is Docker's, as the distribution project specifies it (github.com/distribution/reference,
`reference.go` and `regexp.go`; the digest rules are those of github.com/opencontainers/go-digest):

    reference          := name [ ":" tag ] [ "@" digest ]
    name               := [ domain "/" ] path                      (at most 255 characters)
    domain             := host [ ":" port ]
    host               := domain-name | "[" IPv6 address "]"
    domain-name        := domain-component [ "." domain-component ]*
    domain-component   := /[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9]/
    port               := /[0-9]+/
    path               := path-component [ "/" path-component ]*
    path-component     := alpha-numeric [ separator alpha-numeric ]*
    alpha-numeric      := /[a-z0-9]+/
    separator          := /[_.]|__|[-]+/
    tag                := /[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}/
    digest             := algorithm ":" hex
    algorithm          := /[A-Za-z][A-Za-z0-9]*/ [ /[-_+.]/ /[A-Za-z][A-Za-z0-9]*/ ]*
    hex                := /[0-9a-fA-F]{32,}/

and Docker's normalisation (`ParseNormalizedNamed`): the first path component is a domain only when it
contains "." or ":", is "localhost", or has an upper-case letter; otherwise the domain is "docker.io",
where a one-component path gets the "library/" prefix ("index.docker.io" is written "docker.io"). A reference
of 64 lower-case hex characters is refused (it would read as an image ID), and a reference with neither
tag nor digest gets the tag "latest". Digests must use an algorithm go-digest knows (sha256, sha384,
sha512) with its exact number of lower-case hex characters.

Every character outside this grammar (white space, control characters, quotes, `;`, `$`, backticks,
...) makes the reference invalid, so a reference accepted here is safe to pass as one argument to a
container engine. Errors are `ValueError`s with a one-line reason.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

DEFAULT_DOMAIN = "docker.io"
OFFICIAL_PREFIX = "library/"
DEFAULT_TAG = "latest"
NAME_TOTAL_LENGTH_MAX = 255

_ALPHA_NUMERIC = r"[a-z0-9]+"
_SEPARATOR = r"(?:[_.]|__|-+)"
_PATH_COMPONENT = rf"{_ALPHA_NUMERIC}(?:{_SEPARATOR}{_ALPHA_NUMERIC})*"
_DOMAIN_COMPONENT = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_IPV6 = r"\[[a-fA-F0-9:]+\]"
_HOST = rf"(?:{_DOMAIN_COMPONENT}(?:\.{_DOMAIN_COMPONENT})*|{_IPV6})"
_DOMAIN = rf"{_HOST}(?::[0-9]+)?"
_TAG = r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}"
_DIGEST = r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}"
_REFERENCE = rf"(?:{_DOMAIN}/)?{_PATH_COMPONENT}(?:/{_PATH_COMPONENT})*(?::{_TAG})?(?:@{_DIGEST})?"

PATH_COMPONENT_RE = re.compile(_PATH_COMPONENT)
DOMAIN_RE = re.compile(_DOMAIN)
TAG_RE = re.compile(_TAG)
DIGEST_RE = re.compile(_DIGEST)
REFERENCE_RE = re.compile(_REFERENCE)
_IMAGE_ID_RE = re.compile(r"[a-f0-9]{64}")
# go-digest's registered algorithms and the length of their lower-case hex encoding.
DIGEST_HEX_LENGTHS = {"sha256": 64, "sha384": 96, "sha512": 128}


@dataclass(frozen=True)
class ImageReference:
    """A parsed, normalised image reference.

    domain: the registry host with optional port ("docker.io", "localhost:5000",
        "123456789012.dkr.ecr.us-east-1.amazonaws.com").
    path: the repository path inside the registry ("library/ubuntu", "team/cleanrl").
    tag: the tag ("latest" when the reference gave neither tag nor digest), or None.
    digest: "algorithm:hex", or None.
    `str()` gives the normalised reference `domain/path[:tag][@digest]`.
    """

    domain: str
    path: str
    tag: Optional[str] = None
    digest: Optional[str] = None

    @property
    def registry(self) -> str:
        """The registry, i.e. `domain`."""
        return self.domain

    @property
    def repository(self) -> str:
        """The repository path inside the registry, i.e. `path`."""
        return self.path

    @property
    def name(self) -> str:
        """`domain/path`: the reference without tag and digest."""
        return f"{self.domain}/{self.path}"

    def __str__(self) -> str:
        return self.name + (f":{self.tag}" if self.tag else "") + (f"@{self.digest}" if self.digest else "")


def _split_domain(name: str) -> tuple[str, str]:
    """(domain, path) of a name by Docker's normalisation rule (see the module docstring)."""
    first, slash, rest = name.partition("/")
    if not slash or (not any(c in first for c in ".:") and first != "localhost" and first.lower() == first):
        domain, path = DEFAULT_DOMAIN, name
    else:
        domain, path = first, rest
    if domain == "index.docker.io":
        domain = DEFAULT_DOMAIN
    if domain == DEFAULT_DOMAIN and "/" not in path:
        path = OFFICIAL_PREFIX + path
    return domain, path


def _check_digest(digest: str, quoted: str) -> None:
    if not DIGEST_RE.fullmatch(digest):
        raise ValueError(f"invalid image reference {quoted}: digest {digest!r} is not ALGORITHM:HEX (e.g. sha256:<64 hex>)")
    algorithm, _, hex_part = digest.partition(":")
    if algorithm not in DIGEST_HEX_LENGTHS:
        raise ValueError(
            f"invalid image reference {quoted}: digest algorithm {algorithm!r} is not one of {', '.join(DIGEST_HEX_LENGTHS)}"
        )
    if len(hex_part) != DIGEST_HEX_LENGTHS[algorithm] or not re.fullmatch(r"[a-f0-9]+", hex_part):
        raise ValueError(
            f"invalid image reference {quoted}: a {algorithm} digest has {DIGEST_HEX_LENGTHS[algorithm]} lower-case hex "
            f"characters, not {hex_part!r}"
        )


def parse_reference(ref: str) -> ImageReference:
    """Parses and normalises an image reference such as "ubuntu", "ghcr.io/org/cleanrl:cpu",
    "localhost:5000/cleanrl@sha256:<64 hex>" by Docker's grammar (see the module docstring for it and its
    source). Returns the `ImageReference`; `str()` of it is the normalised form
    ("ubuntu" -> "docker.io/library/ubuntu:latest").

    Raises ValueError with a one-line reason when `ref` is not a string of that grammar: empty, white space
    or control characters, characters outside the grammar, upper-case letters in the repository path, a bad
    domain or port, a tag that is not [A-Za-z0-9_][A-Za-z0-9_.-]{0,127}, a digest that is not sha256, sha384
    or sha512 with its exact length of lower-case hex, a name over 255 characters, or a 64-hex path.
    """
    if not isinstance(ref, str):
        raise ValueError(f"an image reference is a string, not {type(ref).__name__}")
    quoted = repr(ref)  # repr keeps newlines and control characters on one visible line
    if not ref:
        raise ValueError("invalid image reference '': it is empty")
    bad = sorted({c for c in ref if c.isspace() or not c.isprintable() or not c.isascii()})
    if bad:
        raise ValueError(f"invalid image reference {quoted}: it contains {''.join(bad)!r}; references have no white space")
    outside = sorted({c for c in ref if not (c.isalnum() or c in "._-/:@[]+")})
    if outside:
        raise ValueError(f"invalid image reference {quoted}: {''.join(outside)!r} cannot appear in an image reference")

    if _IMAGE_ID_RE.fullmatch(ref):
        raise ValueError(f"invalid image reference {quoted}: 64 hex characters read as an image ID, not a repository name")
    remainder, at, digest = ref.partition("@")
    if at:
        _check_digest(digest, quoted)
    name, tag = remainder, None
    last = remainder.rsplit("/", 1)[-1]
    if ":" in last:
        name, _, tag = remainder.rpartition(":")
        if not TAG_RE.fullmatch(tag):
            raise ValueError(
                f"invalid image reference {quoted}: tag {tag!r} must be 1-128 of A-Z a-z 0-9 _ . - and not start with . or -"
            )
    if not name:
        raise ValueError(f"invalid image reference {quoted}: the repository name is missing")

    domain, path = _split_domain(name)
    if not DOMAIN_RE.fullmatch(domain):
        raise ValueError(f"invalid image reference {quoted}: {domain!r} is not a registry HOST[:PORT]")
    if path != path.lower():
        raise ValueError(f"invalid image reference {quoted}: the repository name {path!r} must be lower-case")
    for component in path.split("/"):
        if not PATH_COMPONENT_RE.fullmatch(component):
            raise ValueError(
                f"invalid image reference {quoted}: path component {component!r} must be a-z 0-9 joined by single . "
                "or _, double __, or dashes, starting and ending with a letter or digit"
            )
    if len(f"{domain}/{path}") > NAME_TOTAL_LENGTH_MAX:
        raise ValueError(f"invalid image reference {quoted}: the name is longer than {NAME_TOTAL_LENGTH_MAX} characters")

    parsed = ImageReference(domain=domain, path=path, tag=tag if (tag or at) else DEFAULT_TAG, digest=digest or None)
    if not REFERENCE_RE.fullmatch(str(parsed)):  # the piecewise checks above must agree with the whole grammar
        raise ValueError(f"invalid image reference {quoted}: it does not match the reference grammar")
    return parsed
