"""The redaction rules, most specific first, each with a cheap test that lets most texts skip it.

A PEM block goes before anything inside it is seen as a token, a JWT before its pieces look like
keys, a URL's credentials before the e-mail rule sees `pass@host`, a resident ID and an IBAN
before the card rule reads their digits. Digit patterns look around with ASCII classes, never
`\\b` or `\\w`: a Chinese character is a word character, so `手机号13812345678` has no word
boundary before the number.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from log_pipeline.redaction import validators as v

Gate = Callable[[str, str], bool]  # (text, its ASCII-sound lower-case form) -> may match


@dataclass(frozen=True, slots=True)
class Rule:
    """One pattern of one kind. With `context`, group 1 is the context that stays (a "Bearer "
    or "password=" prefix) and the rest of the match is the value. Without `valid` or
    `scan_from`, `pattern` is substituted in C (`subn`); with `valid`, each match is checked in
    Python, which says where the redacted span ends (-1: leave it). Texts with fewer than
    `min_digits` digits, or failing `gate` (a cheap test every text with a match passes), are
    not scanned; `scan_from(text, low)`, when set, says where the first match can start (-1:
    nowhere), and the scan begins there (lookbehinds still see the text before it)."""

    kind: str
    pattern: re.Pattern[str]
    gate: Gate | None = None
    min_digits: int = 0
    valid: Callable[[re.Match[str]], int] | None = None
    scan_from: Callable[[str, str], int] | None = None
    context: bool = False
    worded: bool = False  # every match holds a word of WORDS (the text is skipped without one)


def _finds(pattern: str) -> Callable[[str], bool]:
    found = re.compile(pattern).search
    return lambda text: found(text) is not None


def _starts_near(run: str, lead: int) -> Callable[[str, str], int]:
    """The `scan_from` of a kind each of whose matches holds a match of `run` that starts at
    most `lead` characters after its own start: where the first `run` is, less `lead` (-1 when
    there is none)."""
    search = re.compile(run).search

    def scan_from(text: str, _low: str) -> int:
        found = search(text)
        return -1 if found is None else max(found.start() - lead, 0)

    return scan_from


def _first_of(*words: str) -> Callable[[str, str], int]:
    """The `scan_from` of a kind whose matches start with one of `words` (in the lower-cased
    text, whose offsets are the text's, or fewer)."""

    def scan_from(_text: str, low: str) -> int:
        found = [i for i in map(low.find, words) if i >= 0]
        return min(found) if found else -1

    return scan_from


def _says(*words: str) -> Gate:
    """A gate: one of `words` (lower-case ASCII or Chinese) is in the lower-cased text."""
    search = re.compile("|".join(map(re.escape, words))).search
    if len(words) == 1:
        word = words[0]
        return lambda _text, low: word in low
    return lambda _text, low: search(low) is not None


def worded(text: str, low: str) -> bool:
    """False when no `worded` rule can match: none of their words is in the text (substring
    tests run in C, far faster than one regex of alternatives)."""
    return (
        not text.isascii()  # Chinese words; the rules' own gates sort these out
        or "pass" in low
        or "pwd" in low
        or "secret" in low
        or "token" in low
        or "key" in low  # also PRIVATE KEY
        or "credential" in low
        or "bearer" in low
        or "basic" in low
        or "cookie" in low
        or "://" in text
        or "eyJ" in text
        or "_" in text  # the token prefixes: sk_live_, ghp_, hf_, github_pat_, ...
        or "-" in text  # sk-, tp-, glpat-, xoxb-, pypi-
        or "AKI" in text
        or "ASIA" in text
        or "AIza" in text
        or "LTAI" in text
    )


_KEY_PREFIX = re.compile(
    r"sk[-_]|rk_|tp[-_]|gh[pousr]_|github_pat_|glpat-|hf_|xox[abposr]-|npm_|pypi-"
).search


def _key_hint(text: str, _low: str) -> bool:
    if ("_" in text or "-" in text) and _KEY_PREFIX(text) is not None:
        return True
    return "AKI" in text or "ASIA" in text or "AIza" in text or "LTAI" in text


_NOT_LABEL = r"(?!\[REDACTED)"  # a value a rule before already replaced is not redacted again
# key names whose value is a secret: `password`, `db_password`, `AWS_SECRET_ACCESS_KEY`, ...
_SECRET_KEY = (
    r"[A-Za-z0-9_.-]*(?:password|passwd|passcode|pwd|secret|token|api[_-]?key|apikey"
    r"|access[_-]?key|secret[_-]?key|private[_-]?key|credentials?)|pass|密码|口令|密钥"
)
# the same names matched from their last word on (a prefix such as `AWS_SECRET_` stays)
_SECRET_WORD = (
    r"(?<![A-Za-z])(?:password|passwd|passcode|pwd|pass)|(?:secret|token|api[_-]?key|apikey"
    r"|access[_-]?key|secret[_-]?key|private[_-]?key|credentials?)|密码|口令|密钥"
)
# a password typed in Chinese text: printable ASCII but space, quotes, comma and brackets
_CN_VALUE = r"[!#-&(-+\--Z\\^-~]"
# what prose puts after "password is": not a password
_PROSE = (
    r"(?:incorrect|invalid|wrong|expired|correct|required|too|not|empty|missing|changed|reset"
    r"|the|a|an|still|being|case-sensitive|at|in|your|my|stored|saved|sent|weak|strong|different"
    r"|same|protected|encrypted|hashed|visible|shown|never|always|only|also|set|blank|locked"
    r"|valid|right|good|fine|ok|okay|long|short|secure|safe|done|updated)(?![A-Za-z0-9])"
)

# A private key's body as pastes and JSON leave it: runs of base64 and OpenSSL's legacy headers,
# split by line ends (real, or escaped once or twice inside a JSON string; blank lines too) or
# by spaces (a key flattened onto one line). A run of 16 or more goes wherever it stops (a paste
# cut mid-line); a shorter one only when it ends its line, its string or the text, so the words
# after a cut key stay.
_PEM_EOL = r"(?:\r?\n|\\r\\n|\\n|\\\\r\\\\n|\\\\n)"
_PEM_GAP = r"(?:(?:[ \t]*" + _PEM_EOL + r")+[ \t]*|[ \t]+)"
_PEM_BODY = (
    r"(?:" + _PEM_GAP + r"?(?:(?:Proc-Type|DEK-Info|Comment):[^\r\n\\]*"
    r"|[A-Za-z0-9+/]{16,}={0,2}|[A-Za-z0-9+/]+={0,2}(?=[ \t]*(?:" + _PEM_EOL + r"|[\\\"']|$))))*"
)

RULES: tuple[Rule, ...] = (
    Rule(
        "private_key",  # the whole block; a paste cut short ends with its last base64 run
        re.compile(
            r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----(?:(?:[^-]|-(?!----)){0,16384}?-----END "
            r"[A-Z0-9 ]*PRIVATE KEY-----|" + _PEM_BODY + ")"
        ),
        gate=lambda text, _low: "PRIVATE KEY" in text,
        worded=True,
    ),
    Rule(
        "jwt",
        re.compile(r"(?<![A-Za-z0-9_-])eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*"),
        gate=lambda text, _low: "eyJ" in text,
        worded=True,
    ),
    Rule(
        "url_credentials",  # scheme://user:password@host: the user and password go
        re.compile(
            r"(?<![A-Za-z0-9+.-])([A-Za-z][A-Za-z0-9+.-]{1,15}://)[^\s:/@?#\"'<>]*:"
            r"[^\s/@?#\"'<>]+(?=@[A-Za-z0-9\[])"
        ),
        gate=lambda text, _low: "://" in text,
        context=True,
        worded=True,
    ),
    Rule(
        "bearer",
        re.compile(r"(?i)((?<![A-Za-z])bearer\s+)" + _NOT_LABEL + r"[A-Za-z0-9\-._~+/]{8,}=*"),
        gate=_says("bearer"),
        context=True,
        worded=True,
    ),
    Rule(
        "api_key",
        re.compile(
            r"(?<![A-Za-z0-9_-])(?:sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}"
            r"|[sr]k_(?:live|test)_[A-Za-z0-9]{16,}|tp-[A-Za-z0-9_-]{32,}|tp_[A-Za-z0-9_-]{16,}"
            r"|gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{22,}|glpat-[A-Za-z0-9_.-]{20,}"
            r"|hf_[A-Za-z0-9]{30,}|xox[abposr]-[A-Za-z0-9-]{10,}|npm_[A-Za-z0-9]{36}"
            r"|pypi-[A-Za-z0-9_-]{50,}|A(?:KIA|SIA)[0-9A-Z]{16}|AIza[0-9A-Za-z_-]{35}"
            r"|AKID[A-Za-z0-9]{32}|LTAI[A-Za-z0-9]{12,20})(?![A-Za-z0-9])"
        ),
        gate=_key_hint,
        worded=True,
    ),
    Rule(
        "secret",  # Authorization: Basic <user:password in base64>
        re.compile(r"(?i)(authorization[\"']?\s*[:=]\s*[\"']?basic\s+)[A-Za-z0-9+/]{6,}={0,2}"),
        gate=_says("basic"),
        context=True,
        worded=True,
    ),
    Rule(
        "secret",  # Cookie: a=..; b=.. and Set-Cookie: a=..; Path=/ (the whole value)
        re.compile(
            r"(?i)((?<![A-Za-z-])(?:set-)?cookie\s*:\s*)[!#-+\--:<-~]+=[!#-+\--:<-~]*"
            r"(?:;[ \t]*[!#-+\--:<-~]+(?:=[!#-+\--:<-~]*)?)*"
        ),
        gate=_says("cookie"),
        context=True,
        worded=True,
    ),
    Rule(
        "secret",  # "password": "..." in JSON or a Python dict, spaces and all
        re.compile(
            r"(?i)([\"'](?:"
            + _SECRET_KEY
            + r")[\"']\s*:\s*([\"']))"
            + _NOT_LABEL
            + r"(?:(?!\2)[^\\\n]|\\.){1,256}(?=\2)"
        ),
        gate=_says("pass", "pwd", "secret", "token", "key", "credential", "密码", "口令", "密钥"),
        context=True,
        worded=True,
    ),
    Rule(
        "secret",  # password=..., AWS_SECRET_ACCESS_KEY: ..., token: ...
        re.compile(
            r"(?i)((?:"
            + _SECRET_WORD
            + r")\s*[=:：]\s*[\"']?)"
            + _NOT_LABEL
            + r"[^\s\"',;，。；、！？）】\u4e00-\u9fff]{4,}"
        ),
        gate=_says("pass", "pwd", "secret", "token", "key", "credential", "密码", "口令", "密钥"),
        scan_from=_first_of(  # where each name of _SECRET_WORD starts
            "pass",
            "pwd",
            "secret",
            "token",
            "api",
            "access",
            "private",
            "credential",
            "密码",
            "口令",
            "密钥",
        ),
        context=True,
        worded=True,
    ),
    Rule(
        "secret",  # 密码是 abc123 / 支付密码123456 / 新密码设置成了 Abc@123
        re.compile(
            r"((?:密码|口令|密钥)(?:是|为|:|：|=|设置?成了?|改成了?|换成了?)?\s*)"
            + _NOT_LABEL
            + _CN_VALUE
            + r"{4,}"
        ),
        gate=lambda text, _low: "密码" in text or "口令" in text or "密钥" in text,
        context=True,
        worded=True,
    ),
    Rule(
        "secret",  # my password is ..., set the password to ...
        re.compile(
            r"(?i)((?<![A-Za-z])(?:password|passcode|passwd|pwd)\s+(?:is|was|to)\s+"
            r"(?:now\s+|still\s+|just\s+)?)(?!"
            + _PROSE
            + r")"
            + _NOT_LABEL
            + r"[^\s\"',;，。；、！？）】\u4e00-\u9fff]*[^\s\"',;.!?，。；、！？）】\u4e00-\u9fff]"
        ),
        gate=_says("pass", "pwd"),
        context=True,
        worded=True,
    ),
    Rule(
        "email",
        re.compile(
            r"(?<![A-Za-z0-9._%+-])[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*"
            r"\.[A-Za-z]{2,}(?![A-Za-z0-9-])"
        ),
        gate=lambda text, _low: "@" in text,
    ),
    Rule(
        "cn_id",
        re.compile(r"(?<![\dA-Za-z])\d{6} ?\d{8} ?\d{3}[\dXx](?![\dA-Za-z])"),
        min_digits=17,
        valid=v.cn_id,
        scan_from=_starts_near(r"\d{6} ?\d{8}", 0),
    ),
    Rule(
        "passport",  # PRC: G or E + 8 digits, E + a letter (not I or O) + 7, SE/DE/PE + 7
        re.compile(
            r"(?i)(?<![A-Za-z0-9])(?:[EG]\d{8}|E[A-HJ-NP-Z]\d{7}|[SDP]E\d{7})(?![A-Za-z0-9])"
        ),
        gate=lambda _text, low: "护照" in low or "passport" in low,
        min_digits=7,
        valid=v.passport,
        scan_from=_starts_near(r"(?i)[A-Z]{1,2}\d{7}", 0),
    ),
    Rule(
        "iban",
        re.compile(r"(?<![A-Za-z0-9])[A-Z]{2}\d\d(?:[A-Z0-9]{11,30}|(?: [A-Z0-9]{1,4}){3,8})"),
        min_digits=4,
        valid=v.iban,
        scan_from=_starts_near(r"[A-Z]{2}\d\d", 0),
    ),
    Rule(
        "card",
        re.compile(r"(?<![\dA-Za-z-])\d(?:[ -]?\d){13,18}(?![\dA-Za-z-])"),
        min_digits=14,
        valid=v.card,
        scan_from=_starts_near(r"\d(?:[ -]?\d){13}", 0),  # the 14 digits it starts with
    ),
    Rule(
        "us_ssn",
        re.compile(r"(?<![\dA-Za-z-])(\d{3})([- ]?)(\d{2})\2(\d{4})(?![\dA-Za-z-])"),
        min_digits=9,
        valid=v.us_ssn,
        scan_from=_starts_near(r"\d{3}[- ]?\d\d", 0),
    ),
    Rule(
        "ipv6",
        re.compile(
            r"(?<![0-9A-Za-z_:.])(?:[0-9A-Fa-f]{0,4}:){2,7}[0-9A-Fa-f]{0,4}(?![0-9A-Za-z_:])"
        ),
        gate=lambda text, _low: text.count(":") >= 2,
        valid=v.ipv6,
        # its first two colons, and the hex digit before them (up to three more can lead)
        scan_from=_starts_near(r"[0-9A-Fa-f]?:[0-9A-Fa-f]{0,4}:", 3),
    ),
    Rule(
        "ipv4",
        re.compile(
            r"(?<![0-9A-Za-z_.])(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)"
            r"(?:\.(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)){3}(?![0-9A-Za-z_.])"
        ),
        min_digits=4,
        valid=v.ipv4,
        scan_from=_starts_near(r"\d\.\d{1,3}\.\d", 3),
    ),
    Rule(
        "phone",  # a mainland mobile: 11 digits from 13 to 19, after an optional +86
        re.compile(
            r"(?<![\dA-Za-z])(?<![\dA-Za-z]-)(?<!\d[ .])(?:(?:\+|00)86[ -]?|\(\+?86\) ?|86-)?\d{3}"
            r"(?:[ -]?\d{4}){2}(?![\dA-Za-z])(?!-[\dA-Za-z])"
        ),
        min_digits=11,
        valid=v.cn_mobile,
        scan_from=_starts_near(r"\d{3}[ -]?\d{4}", 7),
    ),
    Rule(
        "phone",  # a mainland landline: 010-62345678, (0755)86013388, +86 571 8888 6666
        re.compile(
            r"(?<![\dA-Za-z+])(?<![\dA-Za-z]-)(?<!\d[ .])"
            r"((?:\+86[ -]?)?\(0?\d{2,3}\)|(?:\+86[ -]?)?0?\d{2,3}[ -])[ ]?"
            r"(\d{3,4}[ -]?\d{4})(?![\dA-Za-z])(?!-[\dA-Za-z])"
        ),
        min_digits=9,
        valid=v.cn_landline,
        scan_from=_starts_near(r"\d{2,3}(?:\)|[ -])", 5),
    ),
    Rule(
        "phone",  # an international number: +44 20 7946 0958, +852 9123 4567, +1 (415) 555-2671
        re.compile(
            r"(?<![\dA-Za-z+])\+(?:\d{8,15}|\d{1,3}(?:[ .-]?\(\d{1,4}\))?[ .-]?\d{1,6}"
            r"(?:[ .-]\d{1,6}){0,4})(?![\dA-Za-z])"
        ),
        min_digits=8,
        valid=v.phone,
        scan_from=_starts_near(r"\+\d", 0),
    ),
    Rule(
        "phone",  # (415) 555-2671, 415-555-2671, 415.555.2671
        re.compile(
            r"(?<![\dA-Za-z+])(?<!\d[ .-])(?<![A-Za-z][.-])(?:\(\d{2,4}\)[ .-]?|\d{2,4}[ .-])"
            r"\d{3,4}[ .-]\d{3,4}(?![\dA-Za-z-])(?![ .-]\d)"
        ),
        min_digits=8,
        valid=v.phone,
        # eight digits and separators from its first digit on, which a "(" can lead
        scan_from=_starts_near(r"\d[\d .()-]{6,}\d", 1),
    ),
)
