"""The redaction corpus: customer-service dialogues in Chinese and English, seeded and clean.

Seeded dialogues carry values from `devtools.seeds` (every kind, with the span of each in the
text); clean ones carry only the numbers such conversations are full of: order, tracking and
invoice numbers, dates, times, versions, amounts, room and model numbers. Both were written
from how these conversations go, not from the redaction patterns, so that
`tokenpulse bench redaction` measures recall and false positives rather than restating the
patterns. Deterministic for a seed.
"""

from __future__ import annotations

import random
import re
import string
from collections.abc import Callable
from dataclasses import dataclass

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

# --- the lines: seeded ones per slot, and the topics' clean turns -----------------------------
# `C:` is the customer, `A:` the agent; each dialogue renders them with its own speaker labels.
SEED_LINES: dict[str, dict[str, tuple[str, ...]]] = {
    "MOBILE": {
        "zh": (
            "C:我的手机号是{MOBILE}，麻烦帮我查一下",
            "C:手机号{MOBILE}",
            "C:{MOBILE}",
            "C:收货人张伟，电话{MOBILE}，地址是朝阳区建国路88号{room}",
            "A:已为您登记回访电话：{MOBILE}，师傅会在{date}上门",
            "C:下单留的是{MOBILE}，现在换号了",
            "C:快递员一直打不通我电话，我的号码是 {MOBILE} 请让他再联系一下",
            "C:联系方式：{MOBILE}（微信同号）",
            "C:你们打{MOBILE}就行，白天都在",
            "C:注册账号用的手机是{MOBILE}，收不到验证码",
        ),
        "en": (
            "C:you can reach me on {MOBILE}, I'm in Shanghai",
            "C:The phone on the order is {MOBILE}.",
            "A:I've noted your callback number {MOBILE}.",
        ),
    },
    "LANDLINE": {
        "zh": (
            "C:家里座机{LANDLINE}，白天有人",
            "C:公司电话是{LANDLINE}，找前台就行",
            "A:我们已按您留的座机 {LANDLINE} 回拨，无人接听",
        ),
        "en": ("C:office line is {LANDLINE}, ask for the front desk",),
    },
    "PHONE": {
        "en": (
            "C:My number is {PHONE}, please call after 5pm.",
            "C:call me at {PHONE}",
            "A:We tried to reach you at {PHONE} but there was no answer.",
            "C:Phone: {PHONE}",
            "C:the delivery guy can text {PHONE} when he's outside",
        ),
        "zh": ("C:我在香港，电话{PHONE}", "C:我人在国外，号码是 {PHONE}，可以打这个"),
    },
    "CN_ID": {
        "zh": (
            "C:身份证号{CN_ID}",
            "C:我的身份证号码是{CN_ID}，实名认证一直失败",
            "C:{CN_ID}",
            "C:实名认证填的是 {CN_ID} 姓名王芳",
            "A:已核实，身份证号{CN_ID}与账户实名信息一致",
            "C:报关需要身份证吗？我的是{CN_ID}，收件人李娜",
            "C:身份证：{CN_ID}，麻烦开发票抬头写个人",
        ),
        "en": ("C:my Chinese ID number is {CN_ID} if you need it for customs",),
    },
    "CARD": {
        "zh": (
            "C:我用的是尾号{last4}那张，卡号{CARD}",
            "C:退款请退到这张卡：{CARD}，开户行招商银行",
            "C:银行卡号{CARD}，扣了两次款",
            "C:信用卡 {CARD} 有效期 08/27",
        ),
        "en": (
            "C:I paid with card {CARD}, it was charged twice.",
            "C:Card number: {CARD} exp 09/28",
            "C:please refund to {CARD}",
            "C:the card ending {last4}? no wait, it's {CARD}",
        ),
    },
    "IBAN": {
        "en": (
            "C:Please send the refund to my IBAN {IBAN}.",
            "C:IBAN: {IBAN}",
            "C:My bank details: {IBAN}, account holder Anna Schmidt",
            "A:We will transfer the amount to {IBAN} within {days} business days.",
        ),
        "zh": ("C:我在德国，退款请打到我的欧洲账户 IBAN {IBAN}", "C:收款账号（IBAN）：{IBAN}"),
    },
    "SSN": {
        "en": (
            "C:my SSN is {SSN} for the credit check",
            "C:Social security number: {SSN}",
            "C:{SSN} is my social, do you need my date of birth too?",
            "A:For verification we have the SSN on file as {SSN}.",
            "C:the tax form needs my SSN, it's {SSN}",
        ),
    },
    "EMAIL": {
        "zh": (
            "C:我的邮箱是{EMAIL}，发票发这里",
            "C:邮箱：{EMAIL}",
            "C:电子发票请发送至{EMAIL}，谢谢",
            "A:重置链接已发送到您的邮箱{EMAIL}，请在{days}天内完成操作",
            "C:注册邮箱 {EMAIL} 已经收不到邮件了",
        ),
        "en": (
            "C:My email is {EMAIL}.",
            "C:send the invoice to {EMAIL} please",
            "A:A confirmation has been sent to {EMAIL}.",
        ),
    },
    "IPV4": {
        "zh": (
            "C:登录记录里有个陌生IP {IPV4}，不是我登录的",
            "C:我家宽带的公网IP是{IPV4}，被你们封了",
        ),
        "en": ("C:I see logins from {IPV4} that weren't me", "C:our server at {IPV4} gets a 403"),
    },
    "IPV6": {
        "zh": ("C:异地登录提醒显示IP是{IPV6}",),
        "en": ("C:the security alert shows a login from {IPV6}",),
    },
    "API_KEY": {
        "zh": (
            "C:我的接口key是{API_KEY}，一直报401",
            "C:调用的时候用的 {API_KEY}，是不是过期了",
            "C:这是我的token：{API_KEY} 帮我看看权限",
        ),
        "en": (
            "C:here is the key I'm using: {API_KEY}",
            "C:my token {API_KEY} stopped working yesterday",
            "C:```\nexport TOKEN={API_KEY}\n```\nthis returns 401",
            "C:is {API_KEY} revoked?",
        ),
    },
    "JWT": {
        "zh": ("C:接口返回401，我带的token是{JWT}", "C:登录后拿到的令牌：{JWT}，过一会就失效"),
        "en": ("C:the app sends this token: {JWT}", "C:jwt={JWT} gets rejected"),
    },
    "PEM": {
        "zh": ("C:我把私钥贴在这里了，帮我看下格式对不对：\n{PEM}\n部署时报错",),
        "en": (
            "C:Here is the key file contents:\n{PEM}\nIs it the right format?",
            "C:server.key is\n{PEM}",
        ),
    },
    "PASSWORD": {
        "zh": (
            "C:我的密码是{PASSWORD}，登不上去",
            "C:密码：{PASSWORD}",
            "C:账号zhangwei，密码:{PASSWORD}",
            "C:原密码是{PASSWORD}，想改一个新的",
            "C:口令：{PASSWORD}",
            "C:登录密码 {PASSWORD} 提示错误",
            "C:WiFi密码是{PASSWORD}，师傅来了可以直接连",
            "C:新密码设置成{PASSWORD}了还是不行",
            "A:已为您重置，临时密码：{PASSWORD}，请登录后立即修改",
            "C:密码是 {PASSWORD} 你们帮我登一下看看",
        ),
        "en": (
            "C:my password is {PASSWORD} and it still says invalid",
            "C:Password: {PASSWORD}",
            "C:login: lina88 / password: {PASSWORD}",
            "C:I set the new password to {PASSWORD} but it doesn't work",
            "A:Your temporary password is {PASSWORD}; please change it after logging in.",
            "C:pwd={PASSWORD}",
        ),
    },
    "PAYPIN": {"zh": ("C:支付密码是{PAYPIN}，付款一直失败", "C:支付密码{PAYPIN}没错啊")},
    "JSON_CREDS": {
        "zh": ("C:我调登录接口传的是 {JSON_CREDS} 返回400",),
        "en": ("C:I'm posting {JSON_CREDS} to /login and get 400", "C:request body:\n{JSON_CREDS}"),
    },
    "AWS_SECRET": {
        "zh": ("C:我们的配置是这样的：\n{AWS_SECRET}\n上传图片一直失败",),
        "en": ("C:my credentials file has\n{AWS_SECRET}\nbut uploads fail", "C:I set {AWS_SECRET}"),
    },
    "BASIC": {
        "zh": ("C:请求头带了 {BASIC} 还是401",),
        "en": ("C:the webhook sends {BASIC} and you reject it", "C:curl -H '{BASIC}' ..."),
    },
    "COOKIE": {
        "zh": ("C:抓包看到请求头：{COOKIE}，然后就被登出了",),
        "en": (
            "C:the request has {COOKIE} and still redirects to login",
            "C:response headers:\n{COOKIE}",
        ),
    },
    "URL_CREDS": {
        "zh": ("C:我们连接串是 {URL_CREDS} 连不上",),
        "en": ("C:the connection string is {URL_CREDS}", "C:DATABASE_URL={URL_CREDS}"),
    },
    "KEY_VALUE": {
        "zh": ("C:配置里写的 {KEY_VALUE}，对吗",),
        "en": ("C:config has {KEY_VALUE}, is that right?", "C:I pass {KEY_VALUE} in the query"),
    },
    "BEARER": {
        "zh": ("C:请求头是 Authorization: {BEARER}",),
        "en": ("C:I send Authorization: {BEARER} and get 401",),
    },
}

# every turn of a topic is clean: only near-misses
TOPICS: dict[str, dict[str, tuple[str, ...]]] = {
    "zh": {
        "refund": (
            "C:你好，我{date}买的{product}有质量问题，想申请退款",
            "A:您好，很抱歉给您带来不便。麻烦提供一下订单号，我帮您查询",
            "C:订单号{order}",
            "A:查到了，订单金额{amount}，已于{time}签收。请问是什么问题呢？",
            "C:用了{count}天就坏了，开不了机",
            "A:退款申请已提交，{amount}将在{days}个工作日内原路退回到尾号{last4}的卡上",
            "C:好的，谢谢",
        ),
        "logistics": (
            "C:我的快递怎么还没到？",
            "A:您好，请提供订单号，我帮您查一下物流",
            "C:{order}",
            "A:您的包裹运单号{tracking}，{time}到达上海转运中心，预计{date}送达",
            "C:能不能改送到公司？地址是{room}",
            "A:已为您备注，快递员派送前会联系您。如有问题请拨打客服热线{hotline}",
            "C:重量{weight}，尺寸{size}，运费是不是算错了",
        ),
        "account": (
            "C:我的账号登不上了，一直提示密码错误",
            "A:您好，请问您最近是否修改过密码？可以点击“忘记密码”通过手机验证码重置",
            "C:试过了，收不到验证码",
            "A:为了您的账户安全，请勿向任何人透露密码和验证码。您的会员号是{member}吗？",
            "C:是的。App是{version}版本",
            "A:请先升级到最新版本{version}，再尝试重置密码。密码长度需为8-20位，包含字母和数字",
            "C:密码错误次数太多，账户被锁了{count}小时",
        ),
        "invoice": (
            "C:我需要开一张增值税发票",
            "A:好的，请问开个人还是公司抬头？订单号多少？",
            "C:公司抬头，订单{order}，金额{amount}",
            "A:已开具，{invoice}，开票日期{date}",
            "C:税号填错了，能重开吗",
            "A:可以，红冲后重新开具，大约需要{days}个工作日",
        ),
        "repair": (
            "C:我家的空调{model_no}不制冷了，出风口有异味",
            "A:您好，请问购买日期和机身编码是多少？",
            "C:{date}买的，编码{sku}",
            "A:在保修期内。师傅将于{date} {time}上门，地址是{room}对吗？",
            "C:对，小区门禁号{last4}#",
            "A:好的，上门检测免费，更换配件按{amount}收费",
        ),
        "exchange": (
            "C:买的{product}尺码不合适，能换吗",
            "A:可以的，商品支持{days}天无理由退换。请提供订单号",
            "C:订单号{order}，商品编号{sku}",
            "A:换货申请已提交，请在{date}前寄回，寄回单号填写在订单页即可",
            "C:寄回的运单号是{tracking}",
            "A:收到，仓库签收后{days}天内发出新商品",
        ),
        "coupon": (
            "C:优惠券{coupon}用不了",
            "A:这张券需要满{amount}才能使用，有效期到{date}",
            "C:我的订单{order}刚好差几块",
            "A:给您补发了一张{percent}折扣券，会员{member}可叠加使用",
        ),
        "tech": (
            "C:你们的App闪退，错误提示{code}",
            "A:请问手机型号和系统版本？",
            "C:{model_no}，系统{version}",
            "A:已记录，问题编号{uuid}，技术团队会在{days}天内处理",
            "C:升级到{version}以后还是这样，{time}又闪退了一次",
        ),
        "book": (
            "C:请问ISBN {isbn}这本书有货吗",
            "A:有货，现价{amount}，预计{date}发货",
            "C:能开发票吗？订单号{order}",
            "A:可以，电子发票会在确认收货后{days}天内开具",
        ),
    },
    "en": {
        "refund": (
            "C:Hi, I ordered a {product_en} on {date} and it arrived broken.",
            "A:Sorry to hear that! Could you share your order number?",
            "C:Sure, it's {order}.",
            "A:Thanks. I can see the order for {amount}, delivered at {time}.",
            "C:I'd like a refund please.",
            "A:Done. The refund of {amount} will reach the card ending in {last4} within {days} "
            "business days.",
        ),
        "shipping": (
            "C:Where is my package? It's been {days} days.",
            "A:Let me check. What's the order number?",
            "C:Order #{order}",
            "A:It shipped with tracking number {tracking} and is expected on {date}.",
            "C:Can you deliver it to {room} instead?",
            "A:I've updated the address. Weight {weight}, box {size}.",
        ),
        "account": (
            "C:I can't log in, it says my password is incorrect.",
            "A:Have you tried the 'Forgot password' link? The password must be at least 8 "
            "characters.",
            "C:yes, the reset email never arrives",
            "A:Please don't share your password or verification code with anyone, including us.",
            "C:I'm on app version {version}.",
            "A:Please update to {version} and try again. Your account {member} is not locked.",
            "C:the password field is empty after the update, and my token expired",
        ),
        "billing": (
            "C:I was charged twice for {invoice}.",
            "A:I'm sorry about that. Could you confirm the amount?",
            "C:{amount} on {date} at {time}",
            "A:I see two charges. The duplicate will be reversed within {days} days.",
            "C:my API key is not working either since the plan changed",
        ),
        "tech": (
            "C:The app crashes with {code} on my {model_no}.",
            "A:Which version are you running?",
            "C:{version}, request id {uuid}",
            "A:Thanks, ticket {uuid} is open. Please try build {version}.",
            "C:still broken at {time}, about {percent} of the time",
        ),
        "books": (
            "C:Do you have {isbn} in stock?",
            "A:Yes, it's {amount} and ships by {date}.",
            "C:Great, add it to order {order}.",
        ),
    },
}

_SPEAKERS = {
    "zh": [("用户：", "客服："), ("顾客：", "客服："), ("[客户] ", "[客服] "), ("Q：", "A：")],
    "en": [("Customer: ", "Agent: "), ("User: ", "Assistant: "), ("[customer] ", "[agent] ")],
}
SEED_KINDS = (
    "phone",
    "cn_id",
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
_SLOT = re.compile(r"\{(\w+)\}")


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
