"""The redaction corpus: customer-service dialogues in Chinese and English, seeded and clean.

Seeded dialogues carry values from `devtools.seeds` (every kind, with the span of each in the
text); clean ones carry only the numbers such conversations are full of: order, tracking and
invoice numbers, dates, times, versions, amounts, room and model numbers. Both were written
from how these conversations go, not from the redaction patterns, so that
`tokenpulse bench redaction` measures recall and false positives rather than restating the
patterns. Deterministic for a seed. The lines are data (`dialogues.yaml` beside this module,
checked on load); the value generators and the rendering are here.
"""

from __future__ import annotations

import random
import re
import string
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import yaml

from devtools import seeds
from devtools.seeds import Value

# --- clean fillers: the numbers a customer-service conversation is full of --------------------


def _d(r: random.Random, n: int) -> str:
    return "".join(r.choice(string.digits) for _ in range(n))


def _order18(r: random.Random) -> str:
    """An 18-digit order number (as Taobao and others use) that is not a resident ID."""
    while True:
        n = str(r.randint(1, 9)) + _d(r, 17)
        birth_ok = re.fullmatch(r"(19[5-9]\d|200\d)(0[1-9]|1[0-2])(0[1-9]|[12]\d|3[01])", n[6:14])
        if not (birth_ok and seeds.cn_id_check(n[:17]) == n[17]):
            return n


_FILLERS: dict[str, Callable[[random.Random], str]] = {
    "order": lambda r: r.choice(
        [
            _order18(r),
            str(r.randint(1, 9)) + _d(r, 18),
            str(r.randint(1, 9)) + _d(r, 11),
            "E" + _d(r, 17),
            f"{r.randint(230101, 251231)}-{_d(r, 15)}",
            _d(r, 12),
            str(r.choice([2, 3, 4, 5, 6, 7, 8, 9])) + _d(r, 10),  # 11 digits, not a mobile
            "DD" + _d(r, 14),
            "#" + _d(r, 9),
        ]
    ),
    "tracking": lambda r: r.choice(
        [
            "SF" + _d(r, 13),
            "SF" + _d(r, 12),
            "YT" + _d(r, 13),
            "JDVA" + _d(r, 11),
            "JT" + _d(r, 13),
            "7" + _d(r, 13),
            "43" + _d(r, 11),
            "77" + _d(r, 13),
            "E" + r.choice("ABM") + _d(r, 9) + "CN",
            "1Z" + "".join(r.choice(string.ascii_uppercase + string.digits) for _ in range(16)),
            "9400" + _d(r, 18),
            _d(r, 12),
        ]
    ),
    "invoice": lambda r: r.choice(
        [
            f"发票代码 0{_d(r, 11)}，发票号码 {_d(r, 8)}",
            f"发票号码 {r.choice('23')}4{_d(r, 18)}",
            f"INV-{r.randint(2023, 2026)}-{_d(r, 6)}",
            f"invoice #{_d(r, 7)}",
        ]
    ),
    "date": lambda r: r.choice(
        [
            f"{r.randint(2023, 2026)}-{r.randint(1, 12):02d}-{r.randint(1, 28):02d}",
            f"{r.randint(2023, 2026)}年{r.randint(1, 12)}月{r.randint(1, 28)}日",
            f"{r.randint(1, 12)}月{r.randint(1, 28)}号",
            f"{r.randint(2023, 2026)}/{r.randint(1, 12)}/{r.randint(1, 28)}",
            f"{r.randint(2023, 2026)}{r.randint(1, 12):02d}{r.randint(1, 28):02d}",
            f"{r.randint(1, 28)} {r.choice(['Jan', 'Mar', 'May', 'Aug', 'Nov'])} "
            f"{r.randint(2023, 2026)}",
        ]
    ),
    "time": lambda r: r.choice(
        [
            f"{r.randint(0, 23):02d}:{r.randint(0, 59):02d}",
            f"{r.randint(0, 23):02d}:{r.randint(0, 59):02d}:{r.randint(0, 59):02d}",
            f"{r.randint(2024, 2026)}-{r.randint(1, 12):02d}-{r.randint(1, 28):02d} "
            f"{r.randint(0, 23):02d}:{r.randint(0, 59):02d}:{r.randint(0, 59):02d}",
        ]
    ),
    "amount": lambda r: r.choice(
        [
            f"¥{r.randint(1, 9)},{r.randint(100, 999)}.00",
            f"￥{r.randint(1, 999)}.{r.randint(0, 99):02d}",
            f"{r.randint(1, 5000)}元",
            f"{r.randint(1, 999)}.{r.randint(0, 9)}元",
            f"${r.randint(1, 999)}.99",
            f"${r.randint(1, 9)},{r.randint(100, 999)}.{r.randint(0, 99):02d}",
            f"RMB {r.randint(1, 99)},{r.randint(100, 999)}",
            f"€{r.randint(10, 500)},00",
        ]
    ),
    "version": lambda r: r.choice(
        [
            f"{r.randint(1, 12)}.{r.randint(0, 9)}.{r.randint(0, 30)}",
            f"{r.randint(1, 9)}.{r.randint(0, 9)}.{r.randint(0, 9)}.{r.randint(0, 9)}",
            f"{r.randint(7, 8)}.0.{r.randint(30, 55)}.{r.randint(2000, 2800)}",
            f"v{r.randint(1, 5)}.{r.randint(0, 20)}.{r.randint(0, 99)}",
            f"{r.randint(10, 17)}.{r.randint(0, 6)}.{r.randint(0, 3)}.{r.randint(100, 255)}",
        ]
    ),
    "room": lambda r: r.choice(
        [
            f"{r.randint(1, 32)}0{r.randint(1, 9)}室",
            f"{r.randint(1, 12)}栋{r.randint(1, 4)}单元{r.randint(1, 30)}0{r.randint(1, 6)}",
            f"B座{r.randint(10, 35)}{r.randint(1, 20):02d}",
            f"Room {r.randint(100, 3999)}",
            f"Apt {r.randint(1, 30)}{r.choice('ABCDEF')}",
        ]
    ),
    "model_no": lambda r: r.choice(
        [
            f"SM-G{r.randint(9000, 9999)}",
            f"A{r.randint(2000, 3100)}",
            f"RTX {r.choice([3060, 4070, 4090])}",
            f"KFR-{r.randint(26, 72)}GW/{r.choice(['BP3DN8', 'NhGc1B', 'FNhAa-B1'])}",
            f"MI{r.randint(10, 14)}-{_d(r, 4)}",
            f"XQG{r.randint(80, 120)}-BD{r.randint(10, 99)}{_d(r, 3)}",
            f"iPhone {r.randint(12, 16)} Pro",
            f"WH-1000XM{r.randint(3, 5)}",
        ]
    ),
    "product": lambda r: r.choice(
        [
            "蓝牙耳机",
            "空气炸锅",
            "扫地机器人",
            "羽绒服",
            "运动鞋",
            "电饭煲",
            "机械键盘",
            "投影仪",
            "洗衣机",
            "面霜套装",
            "儿童座椅",
            "行李箱",
        ]
    ),
    "product_en": lambda r: r.choice(
        [
            "wireless earbuds",
            "air fryer",
            "robot vacuum",
            "down jacket",
            "running shoes",
            "rice cooker",
            "mechanical keyboard",
            "projector",
            "washing machine",
            "carry-on suitcase",
        ]
    ),
    "sku": lambda r: r.choice([_d(r, 12), f"SKU-{_d(r, 8)}", f"{_d(r, 13)}"]),
    "isbn": lambda r: r.choice(
        [
            f"978-7-{r.randint(100, 999)}-{_d(r, 5)}-{r.randint(0, 9)}",
            f"978{_d(r, 10)}",
            f"ISBN 978-0-{_d(r, 3)}-{_d(r, 5)}-{r.randint(0, 9)}",
        ]
    ),
    "uuid": lambda r: "-".join(
        "".join(r.choice("0123456789abcdef") for _ in range(n)) for n in (8, 4, 4, 4, 12)
    ),
    "hotline": lambda r: r.choice(
        [
            f"400-{_d(r, 3)}-{_d(r, 4)}",
            f"400{_d(r, 7)}",
            "95188",
            "10086",
            f"800-{_d(r, 3)}-{_d(r, 4)}",
        ]
    ),
    "last4": lambda r: _d(r, 4),
    "count": lambda r: str(r.randint(1, 12)),
    "days": lambda r: str(r.choice([3, 5, 7, 15, 30])),
    "percent": lambda r: f"{r.randint(1, 99)}%",
    "code": lambda r: r.choice(
        [
            f"E{r.randint(100, 999)}",
            f"ERR_{r.randint(1000, 9999)}",
            f"错误码 {r.randint(10000, 99999)}",
            f"HTTP {r.choice([403, 500, 502])}",
        ]
    ),
    "coupon": lambda r: "".join(
        r.choice(string.ascii_uppercase + string.digits) for _ in range(10)
    ),
    "member": lambda r: r.choice([f"VIP{_d(r, 8)}", f"会员号 {_d(r, 10)}", f"M{_d(r, 9)}"]),
    "zip": lambda r: r.choice([_d(r, 6), f"{_d(r, 5)}", f"{_d(r, 5)}-{_d(r, 4)}"]),
    "weight": lambda r: f"{r.randint(1, 30)}.{r.randint(0, 9)}kg",
    "size": lambda r: f"{r.randint(20, 200)}x{r.randint(20, 200)}x{r.randint(5, 90)}cm",
    "public_key": seeds.public_block,  # a public key or certificate: no secret, stays
    "visa_ref": lambda r: r.choice(
        [f"CGI{_d(r, 9)}", f"AA00{r.choice('ABCDEF')}{_d(r, 5)}", f"签证申请号 {_d(r, 10)}"]
    ),
}

# --- seeded slots: a value and the text around it that belongs to it --------------------------


@dataclass(frozen=True, slots=True)
class _Piece:
    text: str
    values: tuple[tuple[int, Value], ...]  # (offset in text, value)


def _one(value: Value) -> _Piece:
    return _Piece(value.text, ((0, value),))


def _framed(before: str, value: Value, after: str = "") -> _Piece:
    return _Piece(before + value.text + after, ((len(before), value),))


def _secret(text: str, variant: str) -> Value:
    return Value(text, "secret", variant)


def _json_creds(r: random.Random) -> _Piece:
    pw = seeds.password(r)
    if r.random() < 0.1:
        pw = " ".join(r.sample(["correct", "horse", "battery", "staple", "blue", "moon"], 3))
    user = r.choice(["zhangwei", "admin", "li.na", "service01", "13900001111x"])
    key = r.choice(["password", "password", "passwd", "pwd", "Password", "user_password"])
    before = r.choice(
        [
            f'{{"username": "{user}", "{key}": "',
            f'{{"user":"{user}","{key}":"',
            f'{{\n  "login": "{user}",\n  "{key}": "',
            f"{{'username': '{user}', '{key}': '",
        ]
    )
    quote = "'" if before.endswith("'") else '"'
    after = quote + r.choice(["}", ', "remember": true}', "\n}", f', "captcha": "{_d(r, 4)}"}}'])
    return _framed(before, _secret(pw, "json_password"), after)


def _aws(r: random.Random) -> _Piece:
    key = seeds.aws_secret_access_key(r)
    before = r.choice(
        [
            "aws_secret_access_key = ",
            "aws_secret_access_key=",
            "AWS_SECRET_ACCESS_KEY=",
            "export AWS_SECRET_ACCESS_KEY=",
            "aws_secret_access_key: ",
            '"SecretAccessKey": "',
            "AWS_SECRET_ACCESS_KEY: ",
        ]
    )
    return _framed(before, _secret(key, "aws_secret"), '"' if before.endswith('"') else "")


def _basic(r: random.Random) -> _Piece:
    encoded, _pw = seeds.basic_credentials(r)
    before = r.choice(["Authorization: Basic ", "authorization: basic ", "Authorization:Basic "])
    return _framed(before, _secret(encoded, "basic_auth"))


def _cookie(r: random.Random) -> _Piece:
    names = r.sample(
        [
            "sessionid",
            "SESSION",
            "JSESSIONID",
            "PHPSESSID",
            "_session_id",
            "sid",
            "connect.sid",
            "csrftoken",
            "auth_token",
            "remember_token",
        ],
        2,
    )
    a, b = seeds.session_value(r), seeds.session_value(r)
    if r.random() < 0.6:
        head = r.choice(["Cookie: ", "cookie: ", "Cookie:"])
        text = f"{head}{names[0]}={a}; {names[1]}={b}"
        return _Piece(text, ((0, Value(text, "secret", "cookie", (a, b))),))
    attrs = r.choice(
        [
            "; Path=/; HttpOnly",
            "; Path=/; Secure; HttpOnly; SameSite=Lax",
            f"; Max-Age={r.randint(600, 86400)}; Path=/",
            "",
        ]
    )
    text = f"{r.choice(['Set-Cookie: ', 'set-cookie: '])}{names[0]}={a}{attrs}"
    return _Piece(text, ((0, Value(text, "secret", "set_cookie", (a,))),))


def _url_creds(r: random.Random) -> _Piece:
    user = r.choice(["admin", "root", "app_user", "deploy", "zhangwei", "svc-orders", ""])
    pw = seeds.password(r).replace("@", "%40").replace("/", "").replace("#", "%23")
    pw = pw.replace(" ", "").replace("?", "") or "x" + _d(r, 8)
    host = r.choice(
        [
            "db.internal.example.com",
            "10.0.3.12",
            "rm-bp1abc.mysql.rds.aliyuncs.com",
            "cluster0.ab1cd.mongodb.net",
            "redis.prod.svc",
            "git.example.cn",
            "ftp.shop-example.cn",
            "mq.example.com",
        ]
    )
    scheme = r.choice(
        ["postgres", "postgresql", "mysql", "mongodb+srv", "redis", "amqp", "https", "ftp", "smtp"]
    )
    port = r.choice(["", ":5432", ":3306", ":6379", ":5672", ":21"])
    path = r.choice(["", "/orders", "/app?sslmode=require", "/0", "/group/repo.git"])
    text = f"{scheme}://{user}:{pw}@{host}{port}{path}"
    return _Piece(text, ((0, Value(text, "url_credentials", scheme, (f":{pw}@",))),))


def _generic_secret(r: random.Random) -> _Piece:
    value = r.choice(
        [seeds.opaque_token(r), "".join(r.choice("0123456789abcdef") for _ in range(32))]
    )
    before = r.choice(
        [
            "api_key=",
            "API_KEY=",
            "apikey: ",
            "client_secret=",
            "client_secret: ",
            '"access_token": "',
            "access_token=",
            "secret_key = ",
            "token: ",
            "APP_SECRET=",
        ]
    )
    return _framed(before, _secret(value, "key_value"), '"' if before.endswith('"') else "")


def _bearer(r: random.Random) -> _Piece:
    return _framed(
        r.choice(["Bearer ", "bearer "]), Value(seeds.opaque_token(r), "bearer", "bearer")
    )


def _pem_json(r: random.Random) -> _Piece:
    value = seeds.private_key_json(r)
    before = r.choice(
        [
            '{"type": "service_account", "private_key": "',
            '{"prompt": "这个私钥为什么加载失败？\\n',
            '{"messages": [{"role": "user", "content": "Why does this key fail to load?\\n',
            '{"key": "',
        ]
    )
    after = r.choice(['"}', '", "client_email": "bot@proj.iam.example"}', '"}]}'])
    return _framed(before, value, after)


def _ssn(r: random.Random) -> _Piece:
    value, bare = seeds.us_ssn(r)
    if bare:  # nobody writes nine bare digits without saying what they are
        return _framed(r.choice(["SSN ", "SSN: ", "social security number "]), value)
    return _one(value)


_SLOTS: dict[str, Callable[[random.Random], _Piece]] = {
    "MOBILE": lambda r: _one(seeds.cn_mobile(r)),
    "LANDLINE": lambda r: _one(seeds.cn_landline(r)),
    "PHONE": lambda r: _one(seeds.intl_phone(r)),
    "CN_ID": lambda r: _one(seeds.cn_id(r)),
    "CARD": lambda r: _one(seeds.card(r)),
    "IBAN": lambda r: _one(seeds.iban(r)),
    "SSN": _ssn,
    "EMAIL": lambda r: _one(seeds.email(r)),
    "IPV4": lambda r: _one(seeds.ipv4(r)),
    "IPV6": lambda r: _one(seeds.ipv6(r)),
    "API_KEY": lambda r: _one(seeds.api_key(r)),
    "JWT": lambda r: _one(seeds.jwt(r)),
    "PEM": lambda r: _one(seeds.private_key(r)),
    "PEM_PASTE": lambda r: _one(seeds.private_key_paste(r)),
    "PEM_JSON": _pem_json,
    "PASSPORT": lambda r: _one(seeds.cn_passport(r)),
    "PASSWORD": lambda r: _one(_secret(seeds.password(r), "password")),
    "PAYPIN": lambda r: _one(_secret(_d(r, 6), "payment_pin")),
    "JSON_CREDS": _json_creds,
    "AWS_SECRET": _aws,
    "BASIC": _basic,
    "COOKIE": _cookie,
    "URL_CREDS": _url_creds,
    "KEY_VALUE": _generic_secret,
    "BEARER": _bearer,
}

# --- the lines: seeded ones per slot, and the topics' clean turns (a data file) ---------------
DATA_FILE = Path(__file__).with_name("dialogues.yaml")
Lines = tuple[str, ...]
Table = dict[str, dict[str, Lines]]  # slot or language -> language or topic -> lines
Speakers = dict[str, list[tuple[str, str]]]  # language -> (customer, agent) labels


class DialogueDataError(Exception):
    """The dialogues' data file lacks a part or holds a line the renderer cannot use."""


def _list(where: str, raw: object) -> list[object]:
    if not isinstance(raw, list) or not raw:
        raise DialogueDataError(f"{where}: expected a list")
    return raw


def _lines(where: str, raw: object, planted: bool) -> Lines:
    """A list of `C:`/`A:` lines whose placeholders all have a generator."""
    lines = _list(where, raw)
    for line in lines:
        if not isinstance(line, str) or line[:2] not in ("C:", "A:"):
            raise DialogueDataError(f"{where}: {line!r} does not start with C: or A:")
        for name in _SLOT.findall(line):
            if name not in _FILLERS and (name not in _SLOTS or not planted):
                kind = "slot or filler" if planted else "filler (a topic line plants nothing)"
                raise DialogueDataError(f"{where}: {{{name}}} is no {kind}")
    return tuple(str(line) for line in lines)


def _mapping(where: str, raw: object) -> dict[str, object]:
    if not isinstance(raw, dict) or not raw:
        raise DialogueDataError(f"{where}: expected a mapping")
    return raw


def _pairs(where: str, raw: object) -> list[tuple[str, str]]:
    out = []
    for pair in _list(where, raw):
        labels = pair if isinstance(pair, list) else []
        if len(labels) != 2 or not all(isinstance(x, str) for x in labels):
            raise DialogueDataError(f"{where}: {pair!r} is not a [customer, agent] pair of labels")
        out.append((str(labels[0]), str(labels[1])))
    return out


def load(path: Path = DATA_FILE) -> tuple[Table, Table, Speakers]:
    """The seeded lines per slot and language, the topics per language, and the speaker labels."""
    try:
        doc = _mapping(path.name, yaml.safe_load(path.read_text(encoding="utf-8")))
    except (OSError, yaml.YAMLError) as exc:
        raise DialogueDataError(f"cannot read {path}: {exc}") from exc
    seeded = {
        slot: {
            lang: _lines(f"{path.name}: seed_lines.{slot}.{lang}", lines, planted=True)
            for lang, lines in _mapping(f"{path.name}: seed_lines.{slot}", by_lang).items()
        }
        for slot, by_lang in _mapping(f"{path.name}: seed_lines", doc.get("seed_lines")).items()
    }
    if set(seeded) != set(_SLOTS):  # a slot without lines would never be planted
        raise DialogueDataError(
            f"{path.name}: seed_lines name {sorted(seeded)}, the slots are {sorted(_SLOTS)}"
        )
    topics = {
        lang: {
            topic: _lines(f"{path.name}: topics.{lang}.{topic}", lines, planted=False)
            for topic, lines in _mapping(f"{path.name}: topics.{lang}", by_topic).items()
        }
        for lang, by_topic in _mapping(f"{path.name}: topics", doc.get("topics")).items()
    }
    speakers = {
        lang: _pairs(f"{path.name}: speakers.{lang}", pairs)
        for lang, pairs in _mapping(f"{path.name}: speakers", doc.get("speakers")).items()
    }
    if set(speakers) != set(topics):
        raise DialogueDataError(f"{path.name}: speakers and topics name different languages")
    return seeded, topics, speakers


_SLOT = re.compile(r"\{(\w+)\}")
SEED_LINES, TOPICS, _SPEAKERS = load()
SEED_KINDS = (
    "phone",
    "cn_id",
    "passport",
    "card",
    "iban",
    "us_ssn",
    "email",
    "ipv4",
    "ipv6",
    "api_key",
    "jwt",
    "private_key",
    "secret",
    "url_credentials",
    "bearer",
)


@dataclass(frozen=True, slots=True)
class Seeded:
    """A value planted in a dialogue: the span of its text, and the value."""

    start: int
    end: int
    value: Value


@dataclass(frozen=True, slots=True)
class Dialogue:
    """One conversation as one text, and what was planted in it (nothing, when clean)."""

    lang: str
    topic: str
    text: str
    seeded: tuple[Seeded, ...] = ()


def _render(lines: list[str], lang: str, r: random.Random) -> tuple[str, tuple[Seeded, ...]]:
    customer, agent = r.choice(_SPEAKERS[lang])
    out: list[str] = []
    planted: list[Seeded] = []
    at = 0
    for n, line in enumerate(lines):
        if n:
            out.append("\n")
            at += 1
        who, body = line.split(":", 1)
        label = customer if who == "C" else agent
        out.append(label)
        at += len(label)
        last = 0
        for m in _SLOT.finditer(body):
            lit = body[last : m.start()]
            out.append(lit)
            at += len(lit)
            name = m.group(1)
            if name in _SLOTS:
                piece = _SLOTS[name](r)
                for offset, value in piece.values:
                    start = at + offset
                    planted.append(Seeded(start, start + len(value.text), value))
                text = piece.text
            else:
                text = _FILLERS[name](r)
            out.append(text)
            at += len(text)
            last = m.end()
        out.append(body[last:])
        at += len(body) - last
    return "".join(out), tuple(planted)


def seeded_dialogues(seed: int, size: int) -> list[Dialogue]:
    """`size` dialogues, each with one to three seeded lines among a topic's clean turns;
    the slots take turns (in an order shuffled each round), so every kind is planted often."""
    r = random.Random(seed)
    slots: list[str] = []
    out = []
    for _ in range(size):
        picks = []
        for _ in range(r.choice((1, 1, 2, 3))):
            if not slots:
                slots = sorted(SEED_LINES)
                r.shuffle(slots)
            picks.append(slots.pop())
        lang = r.choice(sorted(SEED_LINES[picks[0]]))
        topic = r.choice(sorted(TOPICS[lang]))
        turns = list(TOPICS[lang][topic][: r.randint(3, len(TOPICS[lang][topic]))])
        for slot in picks:
            by_lang = SEED_LINES[slot]
            line = r.choice(
                by_lang[lang] if lang in by_lang else by_lang[r.choice(sorted(by_lang))]
            )
            turns.insert(r.randint(1, len(turns)), line)
        text, planted = _render(turns, lang, r)
        out.append(Dialogue(lang, topic, text, planted))
    return out


def clean_dialogues(seed: int, size: int) -> list[Dialogue]:
    """`size` dialogues made of topics' clean turns only: numbers, dates, versions, amounts."""
    r = random.Random(seed)
    out = []
    for i in range(size):
        lang = "zh" if i % 3 else "en"
        topic = r.choice(sorted(TOPICS[lang]))
        turns = list(TOPICS[lang][topic])
        if r.random() < 0.5:  # a second topic in the same conversation
            other = TOPICS[lang][r.choice(sorted(TOPICS[lang]))]
            turns += other[1 : r.randint(2, len(other))]
        text, _ = _render(turns, lang, r)
        out.append(Dialogue(lang, topic, text))
    return out
