"""Checks a pattern's match must pass to be redacted: check digits, number plans, context.

Each takes the match and returns where the redacted span ends (usually the match's end), or -1
to leave it. `int(c)` reads any script's digit, as the patterns' `\\d` does.
"""

from __future__ import annotations

import datetime
import ipaddress
import re

Match = re.Match[str]


def luhn_ok(text: str) -> bool:
    """True when the digits of `text` are 13-19 long and pass the Luhn check."""
    digits = [int(c) for c in text if c.isdigit()]
    if not 13 <= len(digits) <= 19:
        return False
    total = 0
    for i, d in enumerate(reversed(digits)):
        if i % 2 == 1:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


def _digits(text: str) -> str:
    return "".join(str(int(c)) for c in text if c.isdigit())


def _before(m: Match, width: int) -> str:
    """Up to `width` characters before the match, lower-cased."""
    return m.string[max(0, m.start() - width) : m.start()].lower()


# --- cards -------------------------------------------------------------------------------------
def _card_lengths(digits: str) -> tuple[int, ...]:
    """The lengths a card number with these leading digits has (ISO/IEC 7812 issuers in use)."""
    two, four = int(digits[:2]), int(digits[:4])
    if digits[0] == "4":
        return (16, 19)  # Visa (13-digit Visas are long retired)
    if 51 <= two <= 55 or 2221 <= four <= 2720:
        return (16,)  # Mastercard
    if two in (34, 37):
        return (15,)  # American Express
    if two == 62 or four == 6011 or two == 65 or 644 <= int(digits[:3]) <= 649:
        return (16, 17, 18, 19)  # UnionPay, Discover
    if 3528 <= four <= 3589:
        return (16, 17, 18, 19)  # JCB
    if two in (36, 38, 39) or 300 <= int(digits[:3]) <= 305:
        return (14, 16)  # Diners Club
    if two in (50, 56, 57, 58) or digits[0] == "6":
        return (16, 17, 18, 19)  # Maestro
    return ()


# words that say what a long number is, near it: another kind of number, or a card
_OTHER_NUMBER = re.compile(
    r"订单|单号|编号|编码|运单|快递|物流|发票|税号|工单|会员|order|tracking|invoice|ref|sku|isbn"
    r"|ticket|case|no\.|#"
)
_CARD_WORDS = re.compile(
    r"卡|card|visa|master|amex|unionpay|银联|pay|paid|charged|refund|退款|扣款|付款|支付"
)


def _last(pattern: re.Pattern[str], text: str) -> int:
    """Where the last match of `pattern` in `text` ends (-1 when none)."""
    end = -1
    for found in pattern.finditer(text):
        end = found.end()
    return end


def card(m: Match) -> int:
    """A payment card: an issuer's prefix and length and Luhn, unless words about another kind
    of number (an order, a tracking number) are nearer before it than words about cards."""
    digits = _digits(m.group())
    if len(digits) not in _card_lengths(digits) or not luhn_ok(digits):
        return -1
    before = _before(m, 48)
    return m.end() if _last(_CARD_WORDS, before) >= _last(_OTHER_NUMBER, before) else -1


# --- Chinese resident ID, IBAN, SSN ------------------------------------------------------------
_ID_WEIGHTS = (7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2)
_ID_CHECK = "10X98765432"
_PROVINCES = frozenset(
    "11 12 13 14 15 21 22 23 31 32 33 34 35 36 37 41 42 43 44 45 46 50 51 52 53 54 61 62 63 64 "
    "65 71 81 82 83".split()
)


def cn_id_ok(text: str) -> bool:
    """An 18-character resident ID (GB 11643-1999): a province, a real birth date, the check."""
    chars = [c for c in text if not c.isspace()]
    if len(chars) != 18 or not all(c.isdigit() for c in chars[:17]):
        return False
    body = "".join(str(int(c)) for c in chars[:17])
    if body[:2] not in _PROVINCES:
        return False
    try:
        born = datetime.date(int(body[6:10]), int(body[10:12]), int(body[12:14]))
    except ValueError:
        return False
    if not datetime.date(1900, 1, 1) <= born <= datetime.date.today():
        return False
    check = _ID_CHECK[sum(int(c) * w for c, w in zip(body, _ID_WEIGHTS, strict=True)) % 11]
    last = chars[17].upper()
    return (last if last == "X" else str(int(last)) if last.isdigit() else "") == check


def cn_id(m: Match) -> int:
    """`cn_id_ok` on the match."""
    return m.end() if cn_id_ok(m.group()) else -1


# ISO 13616 registry: country -> IBAN length
_IBAN_LENGTHS = {
    **dict.fromkeys(("NO",), 15), **dict.fromkeys(("BE",), 16),
    **dict.fromkeys(("DK", "FI", "FO", "GL", "NL"), 18), **dict.fromkeys(("MK", "SI"), 19),
    **dict.fromkeys(("AT", "BA", "EE", "KZ", "LT", "LU", "XK"), 20),
    **dict.fromkeys(("CH", "HR", "LI", "LV"), 21),
    **dict.fromkeys(("BG", "BH", "CR", "DE", "GB", "GE", "IE", "ME", "RS", "VA"), 22),
    **dict.fromkeys(("AE", "GI", "IL", "IQ", "TL"), 23),
    **dict.fromkeys(("AD", "CZ", "ES", "MD", "PK", "RO", "SA", "SE", "SK", "TN", "VG"), 24),
    **dict.fromkeys(("PT", "ST"), 25), **dict.fromkeys(("IS", "TR"), 26),
    **dict.fromkeys(("FR", "GR", "IT", "MC", "MR", "SM"), 27),
    **dict.fromkeys(("AL", "AZ", "CY", "DO", "GT", "HU", "LB", "PL", "SV"), 28),
    **dict.fromkeys(("BR", "EG", "PS", "QA", "UA"), 29),
    **dict.fromkeys(("JO", "KW", "MU"), 30), **dict.fromkeys(("MT", "SC"), 31),
    **dict.fromkeys(("LC",), 32),
}  # fmt: skip


def iban_ok(text: str) -> bool:
    """A registered country's length and the ISO 7064 mod 97-10 check."""
    code = text.replace(" ", "").upper()
    if _IBAN_LENGTHS.get(code[:2]) != len(code) or not code.isascii() or not code.isalnum():
        return False
    return int("".join(str(int(c, 36)) for c in code[4:] + code[:4])) % 97 == 1


def iban(m: Match) -> int:
    """An IBAN; a printed one may be followed by a word in capitals, so its length decides
    where it ends."""
    text = m.group()
    want = _IBAN_LENGTHS.get(text[:2])
    if want is None:
        return -1
    seen = 0
    for i, c in enumerate(text):
        if c != " ":
            seen += 1
            if seen == want:
                return m.start() + i + 1 if iban_ok(text[: i + 1]) else -1
    return -1


_SSN_WORDS = re.compile(r"ssn|social|社会安全|社保号")


def us_ssn(m: Match) -> int:
    """A US SSN the SSA could issue (area not 000, 666 or 9xx; group and serial not zero); nine
    bare digits only where the text just said it is one."""
    area, group, serial = m.group(1), m.group(3), m.group(4)
    if area in ("000", "666") or area[0] == "9" or group == "00" or serial == "0000":
        return -1
    if not m.group(2) and not _SSN_WORDS.search(_before(m, 32)):
        return -1
    return m.end()


# --- passports ---------------------------------------------------------------------------------
_PASSPORT_WORDS = re.compile(r"护照|passport")


def passport(m: Match) -> int:
    """A PRC passport number only where the text calls it one, just before or just after: its
    shape (a letter or two and 7-8 digits) is also an error code's or a product's."""
    if _PASSPORT_WORDS.search(_before(m, 40)):
        return m.end()
    after = m.string[m.end() : m.end() + 24].lower()
    return m.end() if _PASSPORT_WORDS.search(after) else -1


# --- network -----------------------------------------------------------------------------------
def ipv6(m: Match) -> int:
    """A valid IPv6 address (not a time or a MAC address)."""
    text = m.group()
    try:
        ipaddress.IPv6Address(text)
    except ValueError:
        return -1
    return m.end() if sum(c.isalnum() for c in text) >= 2 else -1


_VERSION_WORDS = re.compile(
    r"version|(?<![a-z])ver\b|build|release|firmware|update to|upgrade to|版本|系统|固件|升级到"
    r"|更新到|(?<![a-z])(?:ios|android)(?![a-z])"
)
_VERSION_AFTER = re.compile(r"\s?(?:版本|版|build|release)")
_IP_WORDS = re.compile(
    r"(?<![a-z])ip(?![a-z])|address|地址|server|host|服务器|login|登录|from|访问|connect"
)


def ipv4(m: Match) -> int:
    """An IPv4 address, unless words about versions are nearer before it than words about
    addresses, or a version word follows it."""
    if _VERSION_AFTER.match(m.string, m.end()):
        return -1
    before = _before(m, 48)
    return m.end() if _last(_IP_WORDS, before) >= _last(_VERSION_WORDS, before) else -1


# --- phones --------------------------------------------------------------------------------------
_TOLL_FREE = ("800", "833", "844", "855", "866", "877", "888")
_HOTLINE = re.compile(r"热线|客服|服务电话|hotline|toll.free|customer (?:service|care)|helpline")


def phone(m: Match) -> int:
    """A phone number: 8-15 digits; not a business line (a mainland 400 number, or a toll-free
    one the text calls a hotline)."""
    text = m.group()
    digits = _digits(text)
    if not 8 <= len(digits) <= 15:
        return -1
    if len(digits) == 10 and "+" not in text and digits.startswith("400"):
        return -1
    local = digits[1:] if len(digits) == 11 and digits[0] == "1" else digits
    if local.startswith(_TOLL_FREE) and _HOTLINE.search(_before(m, 24)):
        return -1
    return m.end()


def cn_mobile(m: Match) -> int:
    """A mainland mobile: eleven digits from 13 to 19 (after an optional +86)."""
    digits = _digits(m.group())[-11:]
    return m.end() if digits[0] == "1" and digits[1] in "3456789" else -1


_AREA_3 = ("10", "20", "21", "22", "23", "24", "25", "27", "28", "29")


def cn_landline(m: Match) -> int:
    """A mainland landline: a real area code's shape (after 0, or after +86), then seven or
    eight digits."""
    given, local = m.group(1), _digits(m.group(2))
    area = _digits(given)
    if "+" in given:
        area = area[2:].removeprefix("0")
    elif area.startswith("0"):
        area = area[1:]
    else:
        return -1
    ok_area = (len(area) == 2 and area in _AREA_3) or (len(area) == 3 and area[0] in "3456789")
    return m.end() if ok_area and len(local) in (7, 8) and local[0] not in "01" else -1
