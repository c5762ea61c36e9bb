"""Cloud metadata services, which a configured URL must never point at.

A VM's metadata service hands out its instance credentials and user data to
whoever asks from the VM; taplog sends requests (with keys) to the URLs in its
config, so a base URL naming such a service would turn a config mistake, or a
config written by someone else, into a credential leak. `is_metadata_host`
knows them by address (a link-local one, or the few services that answer
elsewhere) and by name, in every spelling a resolver accepts; names are not
resolved (a name that resolves to one is the network's to block).
"""

from __future__ import annotations

import ipaddress
import socket

# Cloud metadata services (instance credentials, user data) that answer elsewhere than on a
# link-local address (169.254.0.0/16, fe80::/10: refused whole; AWS, Google, Azure, Oracle,
# DigitalOcean, Hetzner, OpenStack, IBM and others on 169.254.169.254, AWS ECS on
# 169.254.170.2, Tencent on 169.254.0.23, Scaleway on 169.254.42.42).
_METADATA_ADDRESSES = frozenset(
    ipaddress.ip_address(address)
    for address in (
        "100.100.100.200",  # Alibaba Cloud
        "192.0.0.192",  # Oracle Cloud (its older address)
        "168.63.129.16",  # Azure's WireServer (the host agent: extension settings, certificates)
        "fd00:ec2::254",  # AWS, over IPv6
        "fd20:ce::254",  # Google Cloud, over IPv6
    )
)
_METADATA_NAMES = frozenset(
    {
        "metadata",  # Google Cloud, short
        "metadata.google.internal",
        "metadata.goog",
        "metadata.azure.com",
        "instance-data",  # AWS
        "instance-data.ec2.internal",
        "metadata.tencentyun.com",
        "metadata.platformequinix.com",
        "metadata.packet.net",  # Equinix Metal, formerly Packet
    }
)
_NAT64 = ipaddress.ip_network("64:ff9b::/96")  # IPv4 addresses reached over IPv6 (RFC 6052)


def is_metadata_host(host: str) -> bool:
    """A cloud metadata service's address or name (see above), in any spelling a resolver
    accepts: link-local addresses whole, the others exactly.

    Catches the forms that slip past a plain parse: 2852039166, 0xa9.0xfe.0xa9.0xfe,
    0251.0376.0251.0376, 169.254.43518, an IPv4 address inside IPv6 (::ffff:…, NAT64
    64:ff9b::…, 6to4 2002:…, ::…), any IPv6 spelling, a zone (%eth0), a trailing dot,
    other letter cases and the dots and letters IDNA maps to ASCII (metadata。goog).
    Names are not resolved.
    """
    host = host.strip("[]").partition("%")[0].lower()
    if not host.isascii():
        try:
            host = host.encode("idna").decode("ascii")
        except UnicodeError:
            return False  # no resolver takes it either
    host = host.rstrip(".")
    if host in _METADATA_NAMES:
        return True
    address = _address(host)
    if address is None:
        return False
    seen = [address]
    if isinstance(address, ipaddress.IPv6Address) and (inner := _ipv4_in(address)) is not None:
        seen.append(inner)
    return any(one.is_link_local or one in _METADATA_ADDRESSES for one in seen)


def _address(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        pass
    try:  # the shorthand and octal/hex forms that inet_aton, and so getaddrinfo, accept
        return ipaddress.IPv4Address(socket.inet_aton(host))
    except (OSError, ValueError):
        return None


def _ipv4_in(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 one carries to its destination, if any."""
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address in _NAT64 or int(address) < 2**32:  # NAT64, or IPv4-compatible (::a.b.c.d)
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return address.sixtofour
