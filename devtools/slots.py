"""The redaction corpus's seeded slots: a value from `devtools.seeds` and the text around it that
belongs to it (`password=`, a JSON body, a cookie header), with the span of each value.

A `{SLOT}` in capitals in `dialogues.yaml` names one of `SLOTS`; the framing is code because a
value's offset in its text is measured as the text is built.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

from devtools import seeds
from devtools.seeds import Value


def digits(r: random.Random, n: int) -> str:
    """`n` random decimal digits."""
    return "".join(r.choice("0123456789") for _ in range(n))


@dataclass(frozen=True, slots=True)
class Piece:
    """A slot's text and the values planted in it."""

    text: str
    values: tuple[tuple[int, Value], ...]  # (offset in text, value)


def _one(value: Value) -> Piece:
    return Piece(value.text, ((0, value),))


def _framed(before: str, value: Value, after: str = "") -> Piece:
    return Piece(before + value.text + after, ((len(before), value),))


def _secret(text: str, variant: str) -> Value:
    return Value(text, "secret", variant)


def _json_creds(r: random.Random) -> Piece:
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
    after = quote + r.choice(
        ["}", ', "remember": true}', "\n}", f', "captcha": "{digits(r, 4)}"}}']
    )
    return _framed(before, _secret(pw, "json_password"), after)


def _aws(r: random.Random) -> Piece:
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


def _basic(r: random.Random) -> Piece:
    encoded, _pw = seeds.basic_credentials(r)
    before = r.choice(["Authorization: Basic ", "authorization: basic ", "Authorization:Basic "])
    return _framed(before, _secret(encoded, "basic_auth"))


def _cookie(r: random.Random) -> Piece:
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
        return Piece(text, ((0, Value(text, "secret", "cookie", (a, b))),))
    attrs = r.choice(
        [
            "; Path=/; HttpOnly",
            "; Path=/; Secure; HttpOnly; SameSite=Lax",
            f"; Max-Age={r.randint(600, 86400)}; Path=/",
            "",
        ]
    )
    text = f"{r.choice(['Set-Cookie: ', 'set-cookie: '])}{names[0]}={a}{attrs}"
    return Piece(text, ((0, Value(text, "secret", "set_cookie", (a,))),))


def _url_creds(r: random.Random) -> Piece:
    user = r.choice(["admin", "root", "app_user", "deploy", "zhangwei", "svc-orders", ""])
    pw = seeds.password(r).replace("@", "%40").replace("/", "").replace("#", "%23")
    pw = pw.replace(" ", "").replace("?", "") or "x" + digits(r, 8)
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
    return Piece(text, ((0, Value(text, "url_credentials", scheme, (f":{pw}@",))),))


def _generic_secret(r: random.Random) -> Piece:
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


def _bearer(r: random.Random) -> Piece:
    return _framed(
        r.choice(["Bearer ", "bearer "]), Value(seeds.opaque_token(r), "bearer", "bearer")
    )


def _pem_json(r: random.Random) -> Piece:
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


def _ssn(r: random.Random) -> Piece:
    value, bare = seeds.us_ssn(r)
    if bare:  # nobody writes nine bare digits without saying what they are
        return _framed(r.choice(["SSN ", "SSN: ", "social security number "]), value)
    return _one(value)


SLOTS: dict[str, Callable[[random.Random], Piece]] = {
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
    "PAYPIN": lambda r: _one(_secret(digits(r, 6), "payment_pin")),
    "JSON_CREDS": _json_creds,
    "AWS_SECRET": _aws,
    "BASIC": _basic,
    "COOKIE": _cookie,
    "URL_CREDS": _url_creds,
    "KEY_VALUE": _generic_secret,
    "BEARER": _bearer,
}
