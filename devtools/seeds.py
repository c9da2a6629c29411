"""Seeded values for the redaction corpus: personal data and secrets in the shapes people use.

Written from the formats' own specifications (GB 11643 check digits, ISO 13616 IBANs, the SSA's
SSN rules, each token provider's documented prefix and length), not from the redaction patterns:
`devtools.dialogues` plants these in customer-service dialogues, and `tokenpulse bench redaction`
measures what the redactor finds. Nothing here imports `log_pipeline`.
"""

from __future__ import annotations

import base64
import json
import random
import string
from collections.abc import Callable
from dataclasses import dataclass

ALNUM = string.ascii_letters + string.digits
URLSAFE = ALNUM + "-_"
FULLWIDTH = str.maketrans("0123456789", "０１２３４５６７８９")


@dataclass(frozen=True, slots=True)
class Value:
    """One seeded value: its text, the redaction kind it should get, its variant (for reports)
    and the parts that must not survive redaction (by default the whole text)."""

    text: str
    kind: str
    variant: str
    must_vanish: tuple[str, ...] = ()

    def vanishing(self) -> tuple[str, ...]:
        """The parts that must be gone from the redacted text."""
        return self.must_vanish or (self.text,)


def _digits(r: random.Random, n: int) -> str:
    return "".join(r.choice(string.digits) for _ in range(n))


def _chars(r: random.Random, alphabet: str, n: int) -> str:
    return "".join(r.choice(alphabet) for _ in range(n))


def luhn_digit(body: str) -> str:
    """The Luhn check digit that completes `body`."""
    total = 0
    for i, c in enumerate(reversed(body)):
        d = int(c)
        if i % 2 == 0:  # doubled: these are odd positions once the check digit is appended
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return str((10 - total % 10) % 10)


# --- Chinese formats ---------------------------------------------------------------------------
CN_MOBILE_PREFIXES = (
    "130 131 132 133 134 135 136 137 138 139 145 147 150 151 152 153 155 156 157 158 159 162 "
    "165 166 167 170 171 172 173 175 176 177 178 180 181 182 183 184 185 186 187 188 189 190 "
    "191 192 193 195 196 197 198 199"
).split()
# real county-level codes (Beijing Dongcheng, Shanghai Huangpu, Guangzhou Tianhe, Shenzhen
# Nanshan, Hangzhou Xihu, Chengdu Wuhou, Wuhan Jiang'an, Xi'an Yanta, Nanjing Gulou, ...)
CN_REGIONS = (
    "110101 110105 110108 120101 310101 310104 310115 320106 320508 330106 330108 340104 "
    "350203 370202 410105 420102 430104 440106 440305 440306 441900 450103 500103 510107 "
    "610113 620102 650102 210203 220102 230103"
).split()
_ID_WEIGHTS = (7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2)
_ID_CHECK = "10X98765432"


def cn_id_check(body17: str) -> str:
    """The GB 11643-1999 check character of the first 17 digits of a resident ID."""
    return _ID_CHECK[sum(int(c) * w for c, w in zip(body17, _ID_WEIGHTS, strict=True)) % 11]


def _birth(r: random.Random) -> str:
    year = r.randint(1950, 2008)
    month = r.randint(1, 12)
    day = r.randint(1, 28 if month == 2 else 30 if month in (4, 6, 9, 11) else 31)
    return f"{year}{month:02d}{day:02d}"


def cn_id_number(r: random.Random) -> str:
    """A valid 18-character resident ID number."""
    body = r.choice(CN_REGIONS) + _birth(r) + _digits(r, 3)
    return body + cn_id_check(body)


def cn_id(r: random.Random) -> Value:
    """A resident ID as people type it: mostly plain, sometimes a lowercase x or spaced 6-8-4."""
    number = cn_id_number(r)
    style = r.random()
    if style < 0.08:
        text = f"{number[:6]} {number[6:14]} {number[14:]}"
    elif style < 0.16 and number.endswith("X"):
        text = number[:-1] + "x"
    else:
        text = number
    return Value(text, "cn_id", "cn_id")


# PRC passports (the National Immigration Administration's numbering, as the Wikipedia article
# "Chinese passport" and Chinese explainers of 护照号码 describe it): the old ordinary passport
# G + 8 digits; the ordinary e-passport (2012 on) E + 8 digits, and, once those 100 million ran
# out, E + a second letter (never I or O, which read as 1 and 0) + 7 digits (EA1234567,
# EB..., EG...); service, diplomatic and public-affairs passports SE/DE/PE + 7 digits.
_PASSPORT_SECOND = "ABCDEFGHJKLMNPQRSTUVWXYZ"


def cn_passport(r: random.Random) -> Value:
    """A PRC passport number: mostly current e-passports, some older G ones, a few official."""
    style = r.random()
    if style < 0.4:
        text, variant = "E" + _digits(r, 8), "e8"
    elif style < 0.75:
        text, variant = "E" + r.choice(_PASSPORT_SECOND) + _digits(r, 7), "e_letter7"
    elif style < 0.9:
        text, variant = "G" + _digits(r, 8), "g8"
    else:
        text, variant = r.choice(["SE", "DE", "PE"]) + _digits(r, 7), "official"
    if r.random() < 0.06:  # typed on a phone without caps
        text = text.lower()
    return Value(text, "passport", variant)


def cn_mobile(r: random.Random) -> Value:
    """A mainland mobile number, in the forms customers write it."""
    n = r.choice(CN_MOBILE_PREFIXES) + _digits(r, 8)
    forms = [
        (n, 40),
        (f"{n[:3]} {n[3:7]} {n[7:]}", 10),
        (f"{n[:3]}-{n[3:7]}-{n[7:]}", 8),
        (f"+86 {n}", 8),
        (f"+86{n}", 6),
        (f"+86 {n[:3]} {n[3:7]} {n[7:]}", 6),
        (f"+86-{n}", 4),
        (f"(+86){n}", 3),
        (f"0086 {n}", 3),
        (f"86-{n}", 2),
        (n.translate(FULLWIDTH), 5),
    ]
    text = r.choices([f for f, _ in forms], weights=[w for _, w in forms])[0]
    return Value(text, "phone", "cn_mobile")


_CN_AREAS = (
    "010",
    "021",
    "020",
    "022",
    "023",
    "024",
    "025",
    "027",
    "028",
    "029",
    "0571",
    "0755",
    "0512",
    "0532",
    "0731",
    "0591",
    "0851",
    "0871",
)


def cn_landline(r: random.Random) -> Value:
    """A mainland landline with its area code."""
    area = r.choice(_CN_AREAS)
    local = str(r.randint(2, 8)) + _digits(r, 7 if len(area) == 3 else r.choice((6, 7)))
    split = f"{local[:4]} {local[4:]}" if len(local) == 8 else local
    text = r.choice(
        [
            f"{area}-{local}",
            f"({area}){local}",
            f"{area} {split}",
            f"{area}-{split}",
            f"+86 {area[1:]} {local}",
        ]
    )
    return Value(text, "phone", "cn_landline")


def intl_phone(r: random.Random) -> Value:
    """A US, UK, HK, TW or SG number."""
    a, b, c = r.randint(201, 989), r.randint(201, 989), _digits(r, 4)
    forms = [
        f"({a}) {b}-{c}",
        f"{a}-{b}-{c}",
        f"+1 {a} {b} {c}",
        f"+1 ({a}) {b}-{c}",
        f"{a}.{b}.{c}",
        f"+1-{a}-{b}-{c}",
        f"+44 20 {_digits(r, 4)} {c}",
        f"+44 7{_digits(r, 3)} {_digits(r, 6)}",
        f"+852 {r.choice('5679')}{_digits(r, 3)} {c}",
        f"+886 9{_digits(r, 2)} {_digits(r, 3)} {_digits(r, 3)}",
        f"+65 {r.choice('89')}{_digits(r, 3)} {c}",
    ]
    return Value(r.choice(forms), "phone", "intl_phone")


# --- cards, IBAN, SSN ------------------------------------------------------------------------
_CARD_SCHEMES = (  # (variant, prefixes, length)
    ("visa", ("4",), 16),
    ("mastercard", ("51", "52", "53", "54", "55", "2221", "2720"), 16),
    ("amex", ("34", "37"), 15),
    ("unionpay", ("62",), 16),
    ("unionpay", ("62",), 19),
    ("jcb", ("3528", "3589"), 16),
    ("discover", ("6011", "65"), 16),
)


def card(r: random.Random) -> Value:
    """A payment card number that passes Luhn, plain or grouped."""
    variant, prefixes, length = r.choice(_CARD_SCHEMES)
    body = r.choice(prefixes)
    body += _digits(r, length - len(body) - 1)
    number = body + luhn_digit(body)
    if variant == "amex":
        grouped = [number[:4], number[4:10], number[10:]]
    else:
        grouped = [number[i : i + 4] for i in range(0, length, 4)]
    text = r.choice([number, number, " ".join(grouped), "-".join(grouped)])
    return Value(text, "card", variant)


_IBAN_BBAN: dict[str, Callable[[random.Random], str]] = {  # ISO 13616 registry shapes
    "DE": lambda r: _digits(r, 18),
    "GB": lambda r: _chars(r, string.ascii_uppercase, 4) + _digits(r, 14),
    "FR": lambda r: (
        _digits(r, 10) + _chars(r, string.ascii_uppercase + string.digits, 11) + _digits(r, 2)
    ),
    "NL": lambda r: _chars(r, string.ascii_uppercase, 4) + _digits(r, 10),
    "ES": lambda r: _digits(r, 20),
    "IT": lambda r: r.choice(string.ascii_uppercase) + _digits(r, 10) + _digits(r, 12),
    "CH": lambda r: _digits(r, 17),
    "BE": lambda r: _digits(r, 12),
    "AT": lambda r: _digits(r, 16),
    "PL": lambda r: _digits(r, 24),
    "AE": lambda r: _digits(r, 19),
    "SA": lambda r: _digits(r, 2) + _digits(r, 18),
}


def iban_check(country: str, bban: str) -> str:
    """The two check digits of an IBAN (ISO 7064 mod 97-10)."""
    moved = bban + country + "00"
    number = int("".join(str(int(c, 36)) for c in moved))
    return f"{98 - number % 97:02d}"


def iban(r: random.Random) -> Value:
    """A valid IBAN, electronic (one run) or printed (groups of four)."""
    country = r.choice(list(_IBAN_BBAN))
    bban = _IBAN_BBAN[country](r)
    number = country + iban_check(country, bban) + bban
    text = (
        number
        if r.random() < 0.5
        else " ".join(number[i : i + 4] for i in range(0, len(number), 4))
    )
    return Value(text, "iban", country)


def us_ssn(r: random.Random) -> tuple[Value, bool]:
    """A US SSN that the SSA could issue; True when written as nine bare digits (which a
    dialogue only does right after saying it is an SSN)."""
    area = r.choice([n for n in range(1, 900) if n != 666])
    group, serial = r.randint(1, 99), r.randint(1, 9999)
    style = r.random()
    if style < 0.75:
        return Value(f"{area:03d}-{group:02d}-{serial:04d}", "us_ssn", "dashed"), False
    if style < 0.88:
        return Value(f"{area:03d} {group:02d} {serial:04d}", "us_ssn", "spaced"), False
    return Value(f"{area:03d}{group:02d}{serial:04d}", "us_ssn", "bare"), True


# --- contact and network ---------------------------------------------------------------------
_PINYIN = (
    "zhang wang li liu chen yang huang zhao wu zhou xu sun ma zhu hu guo he lin luo "
    "wei fang na min jing lei yan jun tao xiaoming lihua"
).split()
_MAIL_DOMAINS = (
    "qq.com",
    "163.com",
    "126.com",
    "foxmail.com",
    "sina.com",
    "gmail.com",
    "outlook.com",
    "hotmail.com",
    "yahoo.co.jp",
    "icloud.com",
    "corp-mail.com.cn",
    "example.org",
    "mail.shop-example.cn",
)


def email(r: random.Random) -> Value:
    """An address: pinyin names, QQ numbers, dots, plus tags."""
    style = r.random()
    if style < 0.25:
        local = str(r.randint(10000, 3999999999))
        domain = "qq.com"
    else:
        parts = r.sample(_PINYIN, 2)
        sep = r.choice(["", ".", "_", "-"])
        local = sep.join(parts) + (str(r.randint(1, 2024)) if r.random() < 0.6 else "")
        if r.random() < 0.08:
            local += "+" + r.choice(["shop", "orders", "news"])
        if r.random() < 0.15:
            local = local.capitalize()
        domain = r.choice(_MAIL_DOMAINS)
    return Value(f"{local}@{domain}", "email", "email")


def ipv4(r: random.Random) -> Value:
    """A public-looking IPv4 address."""
    first = r.choice(
        [
            36,
            39,
            58,
            59,
            101,
            111,
            112,
            114,
            116,
            117,
            119,
            120,
            121,
            123,
            180,
            183,
            202,
            203,
            210,
            218,
            221,
            222,
            223,
            8,
            47,
            104,
        ]
    )
    return Value(
        f"{first}.{r.randint(0, 255)}.{r.randint(0, 255)}.{r.randint(1, 254)}", "ipv4", "ipv4"
    )


def ipv6(r: random.Random) -> Value:
    """An IPv6 address, full or compressed."""
    groups = [f"{r.randint(0, 0xFFFF):x}" for _ in range(8)]
    groups[0] = r.choice(["2001", "2408", "240e", "2409", "fe80", "2a02"])
    text = r.choice(
        [
            ":".join(groups),
            f"{groups[0]}:{groups[1]}::{groups[6]}:{groups[7]}",
            f"{groups[0]}:{groups[1]}:{groups[2]}::{groups[7]}",
        ]
    )
    return Value(text, "ipv6", "ipv6")


# --- secrets -----------------------------------------------------------------------------------
_PASSWORD_WORDS = (
    "sunshine dragon monkey tiger panda xiaoqiang woaini summer winter shanghai "
    "beijing football iloveyou princess"
).split()


def password(r: random.Random) -> str:
    """A password as people choose them: words and digits, symbols, digits only, passphrases."""
    style = r.random()
    if style < 0.3:
        word = r.choice(_PASSWORD_WORDS)
        return (
            (word.capitalize() if r.random() < 0.5 else word)
            + str(r.randint(1, 2024))
            + (r.choice(["", "!", "@", "#", "."]))
        )
    if style < 0.5:
        return _chars(r, ALNUM + "!@#$%^&*", r.randint(8, 16))
    if style < 0.65:
        return _digits(r, r.choice((6, 8)))
    if style < 0.8:
        return r.choice(_PINYIN) + r.choice(["@", "_", ""]) + _digits(r, r.randint(3, 6))
    if style < 0.9:
        return "".join(w.capitalize() for w in r.sample(_PASSWORD_WORDS, 3)) + str(r.randint(0, 9))
    return "-".join(r.sample(_PASSWORD_WORDS, 3))  # a passphrase, letters only


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def jwt(r: random.Random) -> Value:
    """A signed JWT: real JSON header and claims, a random signature."""
    alg = r.choice(["HS256", "RS256", "ES256"])
    header = _b64url(json.dumps({"alg": alg, "typ": "JWT"}, separators=(",", ":")).encode())
    claims: dict[str, str | int] = {
        "sub": str(r.randint(10000, 99999999)),
        "iat": r.randint(1_600_000_000, 1_760_000_000),
    }
    if r.random() < 0.5:
        claims["name"] = r.choice(_PINYIN)
    if r.random() < 0.5:
        claims["exp"] = int(claims["iat"]) + 3600
    payload = _b64url(json.dumps(claims, separators=(",", ":")).encode())
    sig_len = {"HS256": 32, "RS256": 256, "ES256": 64}[alg]
    signature = _b64url(r.randbytes(sig_len))
    return Value(f"{header}.{payload}.{signature}", "jwt", alg)


_PEM_LABELS = (
    "RSA PRIVATE KEY",
    "PRIVATE KEY",
    "EC PRIVATE KEY",
    "OPENSSH PRIVATE KEY",
    "ENCRYPTED PRIVATE KEY",
    "DSA PRIVATE KEY",
)
# the bytes inside each kind of block (RFC 7468 for PKCS#8, RFC 5915 for EC, PKCS#1 for RSA,
# OpenSSH's PROTOCOL.key): DER sizes of common keys, and OpenSSH's 70-character lines
_PEM_SIZES = {
    "RSA PRIVATE KEY": (609, 1192, 1679, 2349),
    "PRIVATE KEY": (48, 138, 1218, 2374),
    "EC PRIVATE KEY": (121, 167, 223),
    "OPENSSH PRIVATE KEY": (387, 1823, 2590),
    "ENCRYPTED PRIVATE KEY": (216, 1298, 2434),
    "DSA PRIVATE KEY": (443, 826),
}


def _pem_lines(r: random.Random, label: str) -> list[str]:
    body = base64.b64encode(r.randbytes(r.choice(_PEM_SIZES[label]))).decode()
    width = 70 if label == "OPENSSH PRIVATE KEY" else 64
    return [body[i : i + width] for i in range(0, len(body), width)]


def _vanishing(lines: list[str]) -> tuple[str, ...]:
    return tuple(line for line in lines if len(line) >= 16)


def private_key(r: random.Random) -> Value:
    """A PEM private key block (a tenth cut short, as a truncated paste or output would be)."""
    label = r.choice(_PEM_LABELS)
    body = base64.b64encode(r.randbytes(r.choice((121, 240, 400, 600)))).decode()
    lines = [body[i : i + 64] for i in range(0, len(body), 64)]
    head = f"-----BEGIN {label}-----"
    if r.random() < 0.1:
        lines = lines[: max(2, len(lines) // 2)]
        text = "\n".join([head, *lines])
        variant = "truncated"
    else:
        text = "\n".join([head, *lines, f"-----END {label}-----"])
        variant = label.lower().replace(" ", "_")
    return Value(text, "private_key", variant, _vanishing(lines))


def private_key_paste(r: random.Random) -> Value:
    """A private key as pastes mangle it: Windows line ends, OpenSSL's legacy encrypted
    headers and their blank line, cut off mid-line (a prompt limit, a terminal's scrollback),
    the body starting on the BEGIN line, or flattened onto one line with spaces (an env var)."""
    label = r.choice(_PEM_LABELS)
    lines = _pem_lines(r, label)
    head, end = f"-----BEGIN {label}-----", f"-----END {label}-----"
    style = r.choice(
        ["crlf", "legacy_encrypted", "cut_mid_line", "glued", "one_line", "one_line_cut"]
    )
    if style == "crlf":
        text = "\r\n".join([head, *lines, end])
    elif style == "legacy_encrypted":
        label = r.choice(["RSA PRIVATE KEY", "EC PRIVATE KEY", "DSA PRIVATE KEY"])
        head, end = f"-----BEGIN {label}-----", f"-----END {label}-----"
        iv = _chars(r, "0123456789ABCDEF", 32 if r.random() < 0.7 else 16)
        cipher = r.choice(["AES-256-CBC", "AES-128-CBC", "DES-EDE3-CBC"])
        headers = ["Proc-Type: 4,ENCRYPTED", f"DEK-Info: {cipher},{iv}", ""]
        kept = lines if r.random() < 0.5 else lines[: max(1, len(lines) // 3)]
        text = "\n".join([head, *headers, *kept] + ([end] if kept is lines else []))
        lines = kept
    elif style == "cut_mid_line":
        cut = r.randint(0, len(lines) - 1)
        lines = [*lines[:cut], lines[cut][: r.randint(20, 60)]]
        text = "\n".join([head, *lines])
    elif style == "glued":
        text = head + "\n".join([*lines, end])
    elif style == "one_line":
        text = " ".join([head, *lines, end])
    else:
        lines = lines[: max(1, len(lines) // 2)]
        text = " ".join([head, *lines])
    return Value(text, "private_key", style, _vanishing(lines))


def private_key_json(r: random.Random) -> Value:
    """A private key inside a JSON string (a request body, a service-account file, a secret
    manager's answer): its line ends are the two characters backslash and n."""
    label = r.choice(_PEM_LABELS)
    lines = _pem_lines(r, label)
    if r.random() < 0.3:  # the rest of the string was cut off
        lines = lines[: max(1, len(lines) // 2)]
        block = "\n".join([f"-----BEGIN {label}-----", *lines])
    else:
        block = "\n".join([f"-----BEGIN {label}-----", *lines, f"-----END {label}-----", ""])
    escaped = json.dumps(block)[1:-1]
    return Value(escaped, "private_key", "json_escaped", _vanishing(lines))


def public_block(r: random.Random) -> str:
    """Public material that is no secret: a public key, a certificate, a CSR, an OpenSSH
    public key line (near-misses: redaction leaves them)."""
    style = r.random()
    if style < 0.25:
        return (
            "ssh-"
            + r.choice(["rsa ", "ed25519 "])
            + base64.b64encode(r.randbytes(r.choice((51, 279)))).decode()
            + " "
            + r.choice(["deploy@ci", "zhangwei@laptop", "ops"])
        )
    label = r.choice(["PUBLIC KEY", "RSA PUBLIC KEY", "CERTIFICATE", "CERTIFICATE REQUEST"])
    body = base64.b64encode(r.randbytes(r.choice((91, 294, 850)))).decode()
    lines = [body[i : i + 64] for i in range(0, len(body), 64)]
    return "\n".join([f"-----BEGIN {label}-----", *lines, f"-----END {label}-----"])


def api_key(r: random.Random) -> Value:
    """A provider token in its documented shape."""
    forms: list[tuple[str, str]] = [
        ("openai", "sk-" + _chars(r, ALNUM, 48)),
        ("openai_project", "sk-proj-" + _chars(r, URLSAFE, r.choice((56, 74, 124)))),
        ("github_classic", r.choice(["ghp_", "gho_", "ghs_", "ghu_"]) + _chars(r, ALNUM, 36)),
        ("github_fine_grained", "github_pat_" + _chars(r, ALNUM, 22) + "_" + _chars(r, ALNUM, 59)),
        ("gitlab", "glpat-" + _chars(r, URLSAFE, 20)),
        ("huggingface", "hf_" + _chars(r, string.ascii_letters, 34)),
        ("stripe_live", "sk_live_" + _chars(r, ALNUM, r.choice((24, 99)))),
        ("stripe_restricted", "rk_live_" + _chars(r, ALNUM, r.choice((24, 99)))),
        ("stripe_test", "sk_test_" + _chars(r, ALNUM, r.choice((24, 99)))),
        (
            "aws_access_key_id",
            r.choice(["AKIA", "ASIA"]) + _chars(r, "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", 16),
        ),
        ("google", "AIza" + _chars(r, URLSAFE, 35)),
        ("slack", f"xoxb-{_digits(r, 12)}-{_digits(r, 13)}-{_chars(r, ALNUM, 24)}"),
        ("tokenpulse", "tp-" + secrets_token_urlsafe(r, 32)),
    ]
    variant, text = r.choice(forms)
    return Value(text, "api_key", variant)


def secrets_token_urlsafe(r: random.Random, nbytes: int) -> str:
    """`secrets.token_urlsafe(nbytes)`, from a seeded generator (the gateway's key format)."""
    return _b64url(r.randbytes(nbytes))


def aws_secret_access_key(r: random.Random) -> str:
    """The 40-character secret half of an AWS access key."""
    return _chars(r, ALNUM + "/+", 40)


def basic_credentials(r: random.Random) -> tuple[str, str]:
    """(`user:password` in base64, the password) for an `Authorization: Basic` header."""
    pw = password(r)
    user = r.choice(_PINYIN) + str(r.randint(1, 99))
    return base64.b64encode(f"{user}:{pw}".encode()).decode(), pw


def session_value(r: random.Random) -> str:
    """A cookie's session value."""
    return r.choice(
        [  # shapes of common frameworks' session ids
            _chars(r, "0123456789abcdef", 32),
            _chars(r, ALNUM, 26),
            _b64url(r.randbytes(24)),
            "s%3A" + _chars(r, URLSAFE, 32) + "." + _chars(r, ALNUM + "%", 43),
        ]
    )


def opaque_token(r: random.Random) -> str:
    """An opaque OAuth access token."""
    return r.choice(
        [
            _chars(r, ALNUM, 40),
            _b64url(r.randbytes(30)),
            "ya29." + _chars(r, URLSAFE, 120),
            _chars(r, "0123456789abcdef", 64),
        ]
    )
