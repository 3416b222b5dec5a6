"""push-console in a real browser (scripts/checks/console.sh runs this module): headless Chromium
(Debian's chromium and chromium-driver) driven by Selenium, 1280x900, on a private stack.

The stack on 127.0.0.1 (RabbitMQ 8980, which also derives 9980, 28980 and 29980-29990; Redis 8981;
apns-sandbox 8982 and its admin API 8983; push-ingest 8984; push-render, push-send and
push-feedback's admin listeners 8985-8987; push-console 8988; chromedriver 8989, which talks to
Chromium over a pipe): an apps file of its own (one app, a random ingest key) and an operators file
(mode 600: one operator with a random password hashed by `pushctl console hash-password`, one API
key hashed by `pushctl console hash-key`). push-send runs with PUSH_SEND_MAX_ATTEMPTS=1, so a
notification the sandbox answers 500 is dead-lettered at once.

The tests, in order (each needs the ones before it; a screenshot of every step goes to
.local/console/screenshots/NN-step.png, and one of the page a step failed on):
0. The two pushctl hashes: the password's a pbkdf2-sha256 hash hashlib agrees with, the key's its
   SHA-256 in hex.
1. 12 devices registered through push-ingest's HTTP API with the app's ingest key (locales en, de,
   zh-Hant-TW, fr, all on topic `news`), and one more on another topic.
2. An unauthenticated GET /requests answers 303 /login (and the browser lands there); a wrong
   password shows #error; the right one logs in (#operator, an HttpOnly SameSite=Strict cookie,
   the nav links and the logout form). Tests 3-8 are skipped without a login.
3. Compose: a push to topic `news`, localize=server, title_loc_key SHIPPED_TITLE, loc_key
   GAME_PLAY_REQUEST_FORMAT with loc_args Jenna,Frank. Preview: #preview-targets is 12, every
   locale row's payload has the title and body localization/*.strings give for it (German for de,
   Traditional Chinese for zh-Hant, English for en and fr), the button says "Send to 12 devices".
   Send: 303 to /requests/{app}/{id}.
4. The request page reaches #report[data-state=done] within 60 s; #count-delivered and
   #count-targeted are 12, #count-failed 0, and apns-sandbox's GET /deliveries holds exactly the 12
   topic tokens with that request's apns-collapse-id, each payload in its device's language; the
   request is listed in /requests as done, linking to its page.
5. The sandbox answers every notification 500 (PUT /faults); a push to one token is dead-lettered
   by push-send and shows in /dead with its reason and source push.send (shown as "(push.send)":
   inferred from the body, as push-send's dead letters carry no x-death), in GET /api/v1/dead the
   same, and as failed on its request page; faults cleared; replayed from the page (#notice
   "replayed 1 dead letter to push.send"), gone from /dead, and delivered to the sandbox.
6. /tokens: a lookup shows the device record; delete (#notice, push-ingest then answers 404);
   a second lookup says not found.
7. The JSON API with `Authorization: Bearer <key>`: GET /api/v1/status lists push.send with at
   least one consumer and push.dead and the app (refused without a key or with a wrong one); the
   request's report says done and 12 delivered; the /status page lists the queues and the app.
8. Logout lands on /login, and the next page asks for a login again.
9. Every action (login, logout, preview, send, replay, token delete) logged by push-console with
   push.operator and push.action; neither the password nor the API key in any service's log.
At the end every process must still run and exit 0 on SIGTERM (`serve`), and chromedriver's process
group is killed.

    scripts/checks/console.sh [--bin-dir DIR] [pytest arguments]

Logs, the operators file and the screenshots: .local/console/.
"""
import base64
import functools
import hashlib
import json
import os
import re
import secrets
import shutil
import signal
import time
import urllib.parse
from pathlib import Path

import pytest
from conftest import serve
from harness.net import call, http_json, wait_for
from harness.stack import SERVICES, SetupError, Stack, note_for_cleanup
from selenium import webdriver
from selenium.common.exceptions import (
    NoSuchElementException, StaleElementReferenceException, TimeoutException, WebDriverException)
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select

ROOT = Path(__file__).resolve().parents[2]
BASE_PORT = 8980
CONSOLE_PORT = BASE_PORT + 8
DRIVER_PORT = BASE_PORT + 9
APP = "com.example.console"
OPERATOR = "console-check"
API_KEY_NAME = "console-check-bot"
TOPIC = "news"
LOCALES = ["en", "de", "zh-Hant-TW", "fr"]
DEVICES = 12
TITLE_KEY = "SHIPPED_TITLE"
BODY_KEY = "GAME_PLAY_REQUEST_FORMAT"
LOC_ARGS = ["Jenna", "Frank"]
LOCALIZATION = ROOT / "localization"
REPORT_WAIT = 60
RUN = secrets.token_hex(3)


def say(text):
    print(f"console | {time.strftime('%H:%M:%S')} {text}", flush=True)


# --- the catalogs (what push-render should make of the keys) --------------------------------------

def unescape(text):
    return re.sub(r"\\(.)", lambda m: {"n": "\n", "t": "\t", "r": "\r"}.get(m.group(1), m.group(1)), text)


def read_catalog(path):
    """{key: format} of an Apple .strings file."""
    text = re.sub(r"/\*.*?\*/", "", path.read_text(encoding="utf-8"), flags=re.S)
    text = re.sub(r"(?m)^\s*//.*$", "", text)
    pattern = r'"((?:[^"\\]|\\.)*)"\s*=\s*"((?:[^"\\]|\\.)*)"\s*;'
    return {unescape(m.group(1)): unescape(m.group(2)) for m in re.finditer(pattern, text)}


def catalogs():
    """{locale, lower case: {key: format}} (locale tags compare without case, as push-render's do)."""
    return {path.stem.lower(): read_catalog(path) for path in LOCALIZATION.glob("*.strings")}


def locale_chain(locale):
    """zh-Hant-TW -> zh-Hant-TW, zh-Hant, zh, en (the default catalog last)."""
    parts = locale.replace("_", "-").lower().split("-")
    chain = ["-".join(parts[:n]) for n in range(len(parts), 0, -1)]
    return chain + ([] if "en" in chain else ["en"])


def format_string(fmt, args):
    """%@ in order, %1$@ by position, %% a percent sign (what the catalogs use)."""
    position = iter(args)

    def one(m):
        if m.group(0) == "%%":
            return "%"
        if m.group(1):
            return args[int(m.group(1)) - 1]
        return next(position)

    return re.sub(r"%%|%(?:(\d+)\$)?[@d]", one, fmt)


def expected_alert(all_catalogs, locale):
    """(title, body) a device of `locale` should see for the check's keys."""
    def resolve(key, args):
        for name in locale_chain(locale):
            if key in all_catalogs.get(name, {}):
                return format_string(all_catalogs[name][key], args)
        return None

    return resolve(TITLE_KEY, []), resolve(BODY_KEY, LOC_ARGS)


def verify_pbkdf2(encoded, password):
    """Whether `pbkdf2-sha256$ITERATIONS$SALT$HASH` (base64) is `password`'s hash ('' or why not)."""
    parts = encoded.split("$")
    if len(parts) != 4 or parts[0] != "pbkdf2-sha256" or not parts[1].isdigit():
        return f"not pbkdf2-sha256$<iterations>$<salt>$<hash>: {encoded[:40]!r}"
    try:
        salt = base64.b64decode(parts[2] + "=" * (-len(parts[2]) % 4))
        want = base64.b64decode(parts[3] + "=" * (-len(parts[3]) % 4))
    except ValueError as e:
        return f"salt or hash is not base64: {e}"
    got = hashlib.pbkdf2_hmac("sha256", password.encode(), salt, int(parts[1]), dklen=len(want))
    return "" if got == want else "hashlib.pbkdf2_hmac gives another hash for the password"


# --- the stack -------------------------------------------------------------------------------

class ConsoleStack(Stack):
    APP = APP

    def __init__(self, bin_dir):
        super().__init__(bin_dir, "console", BASE_PORT, tokens=100, log_level="warning")
        self.services = SERVICES + ["push-console"]
        self.port["push-console"] = CONSOLE_PORT
        self.port["chromedriver"] = DRIVER_PORT  # so start_servers waits for it to be free, too
        self.ingest_key = f"console-ingest-{secrets.token_hex(12)}"
        self.operators = self.out / "operators.json"
        self.shots = self.out / "screenshots"
        self.driver_group = self.out / "chromedriver.pgid"
        self.password = secrets.token_urlsafe(18)
        self.api_key = "pcb_" + secrets.token_urlsafe(24)
        self.password_hash = self.key_hash = ""
        self.extra_env = {"push-send": {"PUSH_SEND_MAX_ATTEMPTS": "1"},
                          "push-console": {"PUSH_CONSOLE_OPERATORS_FILE": str(self.operators), "PUSH_LOG_LEVEL": "info",
                                           "PUSH_LOG_FORMAT": "json"}}

    CLEAN_OUT = True   # the previous run's logs and screenshots go (the logs are appended to)

    def start_servers(self):
        kill_driver_group(self.driver_group)   # a killed run's browser, before its directory goes
        super().start_servers()
        self.shots.mkdir()
        self.write_operators()

    def app_definitions(self, apns):
        return {APP: {
            "display_names": ["Console Check"], "default": True, "environment": "production", "apns": apns,
            "ingest": {"api_keys": [self.ingest_key]},
            "rate_limits": {"per_device_per_hour": 1000, "per_app_per_second": 10000},
        }}

    def write_operators(self):
        self.password_hash = self.console_hash("hash-password", self.password)
        self.key_hash = self.console_hash("hash-key", self.api_key)
        operators = {"operators": [{"name": OPERATOR, "password": self.password_hash}],
                     "api_keys": [{"name": API_KEY_NAME, "key_sha256": self.key_hash}]}
        fd = os.open(self.operators, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump(operators, f, indent=2)


def kill_driver_group(path):
    """SIGKILL to what is left of the chromedriver process group `path` names (chromedriver and the
    browser's processes only: a PGID may have been reused since)."""
    try:
        group = int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return
    for pid in os.listdir("/proc"):
        try:
            if not pid.isdigit() or os.getpgid(int(pid)) != group:
                continue
            exe = os.readlink(f"/proc/{pid}/exe")
            if exe == "/usr/bin/chromedriver" or exe.startswith("/usr/lib/chromium/"):
                os.kill(int(pid), signal.SIGKILL)
        except OSError:
            pass


# --- the browser -----------------------------------------------------------------------------

class Browser:
    """Headless Chromium through chromedriver (Debian's), 1280x900; screenshots numbered by step."""

    def __init__(self, stack):
        self.stack = stack
        self.base = f"http://127.0.0.1:{CONSOLE_PORT}"
        self.shots = stack.shots
        self.count = 0
        self.service = None
        self.driver = None
        self.version = "?"

    def start(self):
        chromium = shutil.which("chromium")
        chromedriver = shutil.which("chromedriver")
        if not chromium or not chromedriver:
            raise SetupError("Debian's chromium and chromium-driver are not installed")
        options = webdriver.ChromeOptions()
        options.binary_location = chromium
        for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", "--window-size=1280,900",
                    "--no-proxy-server", "--remote-debugging-pipe", "--no-first-run", "--disable-extensions",
                    "--disable-background-networking", "--disable-sync", "--lang=en-US",
                    f"--user-data-dir={self.stack.out / 'chromium-profile'}"):
            options.add_argument(arg)
        # A confirm() before a delete or a replay is accepted as an operator would.
        options.unhandled_prompt_behavior = "accept"
        # Warnings only: at its default level chromedriver would log every command, typed passwords included.
        # A group of its own, so the browser's processes can be killed with it (`quit`).
        self.service = Service(executable_path=chromedriver, port=DRIVER_PORT, log_output=str(self.stack.out / "chromedriver.log"),
                               service_args=["--log-level=WARNING"], popen_kw={"start_new_session": True})
        try:
            self.driver = webdriver.Chrome(service=self.service, options=options)
        except WebDriverException as e:
            raise SetupError(f"Chromium did not start through chromedriver: {str(e).strip()[:600]}") from e
        finally:
            if self.group():
                # For the next run and the wrapper's cleanup, should this one be killed before `quit`.
                self.stack.driver_group.write_text(f"{self.group()}\n")
                note_for_cleanup(f"group {self.group()}")
        self.driver.set_page_load_timeout(30)
        self.driver.set_window_size(1280, 900)
        self.version = self.driver.capabilities.get("browserVersion", "?")

    def group(self):
        process = getattr(self.service, "process", None)
        return process.pid if process else None

    def quit(self):
        if self.driver:
            try:
                self.driver.quit()
            except Exception as e:  # noqa: BLE001  (the browser may be gone already)
                say(f"closing the browser: {e}")
        group = self.group()
        if group:
            # What is left of chromedriver's process group (the browser's helpers), after a moment.
            deadline = time.time() + 5
            while time.time() < deadline:
                try:
                    os.killpg(group, 0)
                except ProcessLookupError:
                    break
                time.sleep(0.2)
            else:
                try:
                    os.killpg(group, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        self.stack.driver_group.unlink(missing_ok=True)

    # navigation and waits
    def go(self, path):
        self.driver.get(self.base + path)

    def path(self):
        return urllib.parse.unquote(urllib.parse.urlsplit(self.driver.current_url).path)

    def shot(self, step, focus=None):
        """A screenshot of the window, named by step; `focus`: an element scrolled into view first."""
        self.count += 1
        name = f"{self.count:02d}-{step}.png"
        try:
            if focus and self.has(focus):
                self.driver.execute_script("arguments[0].scrollIntoView({block: 'start'});", self.find(focus))
            self.driver.save_screenshot(str(self.shots / name))
        except WebDriverException as e:
            say(f"screenshot {name}: {e}")
        return name

    def find(self, css):
        return self.driver.find_element(By.CSS_SELECTOR, css)

    def finds(self, css):
        return self.driver.find_elements(By.CSS_SELECTOR, css)

    def has(self, css):
        return bool(self.finds(css))

    def text(self, css):
        return self.find(css).text.strip()

    def wait(self, css, timeout=15):
        """The first element matching `css`, waited for."""
        deadline = time.time() + timeout
        while True:
            found = self.finds(css)
            if found:
                return found[0]
            if time.time() > deadline:
                raise TimeoutException(f"no {css} on {self.path()} within {timeout} s")
            time.sleep(0.1)

    def click_to_next_page(self, element, css, timeout=20):
        """Clicks `element` (a submit button or link), waits for the page to be replaced and for `css` on the new one."""
        old = self.find("html")
        element.click()
        deadline = time.time() + timeout
        while True:
            try:
                old.tag_name
            except WebDriverException:
                # Stale, or (as Chromium sometimes says while the new document loads) a node that
                # "does not belong to the document": either way the old page is gone.
                break
            if time.time() > deadline:
                raise TimeoutException(f"the page did not change within {timeout} s after the click")
            time.sleep(0.1)
        return self.wait(css, max(1.0, deadline - time.time()))

    def fill(self, form, name, value):
        field = form.find_element(By.CSS_SELECTOR, f"[name='{name}']")
        if field.tag_name == "select":
            Select(field).select_by_value(value)
        else:
            field.clear()
            if value:
                field.send_keys(value)


# --- the scenario ----------------------------------------------------------------------------

# The row of one request in /requests (data-app, data-state, its links), or every row's id.
REQUESTS_LISTING = """
const rows = Array.from(document.querySelectorAll("table#requests tr.request"));
const row = rows.find((r) => r.dataset.requestId === arguments[0]);
return {
  ids: rows.map((r) => r.dataset.requestId),
  row: row ? {app: row.dataset.app, state: row.dataset.state, hrefs: Array.from(row.querySelectorAll("a")).map((a) => a.href)} : null,
};
"""


def cell(row, css):
    """The text of `css` in a table row ('' when it has none)."""
    found = row.find_elements(By.CSS_SELECTOR, css)
    return found[0].text.strip() if found else ""


def step(method):
    """A step that raises leaves a screenshot of the page it was on (the test fails with the error)."""
    @functools.wraps(method)
    def run(self):
        try:
            return method(self)
        except Exception:
            try:
                slug = method.__name__.replace("_", "-")
                self.check.log(f"{method.__name__} raised on page {self.browser.path()}; "
                               f"screenshot {self.browser.shot(slug + '-error')}")
            except WebDriverException:
                pass
            raise
    return run


class Scenario:
    """What the steps share: the browser, the devices and the requests they send. `check` is the
    running test's."""

    def __init__(self, stack, browser):
        self.stack = stack
        self.browser = browser
        self.check = None
        self.catalogs = catalogs()
        self.tokens = [hashlib.sha256(f"console:{RUN}:{i}".encode()).hexdigest() for i in range(DEVICES)]
        self.locale = {t: LOCALES[i % len(LOCALES)] for i, t in enumerate(self.tokens)}
        self.bystander = hashlib.sha256(f"console:{RUN}:bystander".encode()).hexdigest()
        self.request_id = f"console-news-{RUN}"
        self.dead_request_id = f"console-dead-{RUN}"
        self.logged_in = None   # test_login not run yet; then whether it logged in
        self.timings = {}

    def api(self, method, path, key=None, body=None):
        """The console's JSON API with the bearer key (`key=""`: none)."""
        headers = {"Authorization": f"Bearer {key if key is not None else self.stack.api_key}"} if key != "" else {}
        reply = call(CONSOLE_PORT, method, path, body=body, headers=headers, timeout=10)
        try:
            return reply.status, json.loads(reply.body) if reply.body else None
        except ValueError:
            return reply.status, reply.body[:300]

    def sandbox_deliveries(self, since_ms, collapse_id):
        data = http_json(self.stack.port["admin"], "GET", f"/deliveries?app={APP}&since={since_ms}", timeout=30)
        return [d for d in data.get("deliveries", []) if (d.get("headers") or {}).get("apns-collapse-id") == collapse_id]

    # 0
    def operator_hashes(self):
        why = verify_pbkdf2(self.stack.password_hash, self.stack.password)
        self.check(not why, "`pushctl console hash-password` prints a pbkdf2-sha256 hash of the password", why)
        self.check(self.stack.key_hash == hashlib.sha256(self.stack.api_key.encode()).hexdigest(),
                   "`pushctl console hash-key` prints the key's SHA-256 in hex", f"{self.stack.key_hash[:70]!r}")

    # 1
    @step
    def register_devices(self):
        statuses = []
        for i, token in enumerate(self.tokens + [self.bystander]):
            body = {"user": f"console-user{i}", "locale": self.locale.get(token, "en"), "environment": "production",
                    "topics": [TOPIC] if token != self.bystander else ["sports"]}
            reply = call(self.stack.port["push-ingest"], "PUT", f"/v1/apps/{APP}/devices/{token}", body=body,
                         headers={"Authorization": f"Bearer {self.stack.ingest_key}"}, timeout=10)
            statuses.append(reply.status)
        self.check(all(s in (200, 201) for s in statuses),
                   f"{DEVICES} devices on topic {TOPIC} ({', '.join(LOCALES)}) and one on another topic registered "
                   f"through push-ingest's PUT /v1/apps/{{app}}/devices/{{token}}", f"HTTP {statuses}")

    # 2
    @step
    def login(self):
        self.logged_in = False
        b = self.browser
        reply = call(CONSOLE_PORT, "GET", "/requests", timeout=10)
        location = urllib.parse.urlsplit(reply.headers.get("location", "")).path
        self.check(reply.status == 303 and location == "/login", "an unauthenticated GET /requests answers 303 to /login",
                   f"HTTP {reply.status}, Location {reply.headers.get('location')!r}")
        b.go("/requests")
        b.wait("form#login")
        self.check(b.path() == "/login", "the browser opening /requests lands on the login page", f"at {b.path()}")
        b.shot("login-redirect")

        form = b.find("form#login")
        b.fill(form, "name", OPERATOR)
        b.fill(form, "password", self.stack.password + "-wrong")
        b.shot("login-wrong-password-filled")
        b.click_to_next_page(b.find("#login-submit"), "form#login")
        error = b.text("#error") if b.has("#error") else None
        self.check(bool(error) and not b.has("#operator"), "a wrong password shows the login page again with #error",
                   f"#error {error!r}, at {b.path()}")
        b.shot("login-wrong-password")

        form = b.find("form#login")
        b.fill(form, "name", OPERATOR)
        b.fill(form, "password", self.stack.password)
        b.click_to_next_page(b.find("#login-submit"), "#operator")
        operator = b.text("#operator")
        self.check(OPERATOR in operator, "the right password logs in: #operator names the operator", f"#operator {operator!r}")
        self.logged_in = True
        cookie = b.driver.get_cookie("push_console_session") or {}
        self.check(cookie.get("httpOnly") is True and str(cookie.get("sameSite")).lower() == "strict",
                   "the session cookie push_console_session is HttpOnly and SameSite=Strict",
                   f"cookie {({k: cookie.get(k) for k in ('httpOnly', 'sameSite', 'secure')} if cookie else None)}")
        missing = [n for n in ("nav-compose", "nav-requests", "nav-dead", "nav-status", "nav-tokens") if not b.has(f"a#{n}")]
        missing += [] if b.has("form#logout #logout-submit") else ["form#logout button#logout-submit"]
        self.check(not missing, "every page after login has the nav links and the logout form", f"missing {missing}")
        b.shot("logged-in")

    # 3
    @step
    def compose_and_send(self):
        b = self.browser
        b.click_to_next_page(b.find("a#nav-compose"), "form#compose")
        form = b.find("form#compose")
        apps = [o.get_attribute("value") for o in form.find_elements(By.CSS_SELECTOR, "select[name='app'] option")]
        self.check(APP in apps, "compose: the app select offers the apps file's bundle id", f"options {apps}")
        for name, value in (("app", APP), ("target_kind", "topic"), ("target", TOPIC), ("request_id", self.request_id),
                            ("title_loc_key", TITLE_KEY), ("loc_key", BODY_KEY), ("loc_args", ",".join(LOC_ARGS)),
                            ("localize", "server"), ("collapse_id", self.request_id)):
            b.fill(form, name, value)
        b.shot("compose-filled")
        b.click_to_next_page(b.find("#preview-submit"), "#preview")
        b.shot("preview", focus="#preview")
        error = b.text("#error") if b.has("#error") else ""
        targets = b.text("#preview-targets")
        self.check(targets == str(DEVICES), f"preview: #preview-targets is the {DEVICES} devices on topic {TOPIC}",
                   f"#preview-targets {targets!r}{', #error ' + repr(error) if error else ''}")
        rows = {}
        for row in b.finds("table#preview-locales tr.locale"):
            locale = row.get_attribute("data-locale")
            pre = row.find_elements(By.CSS_SELECTOR, "pre.payload")
            rows[locale] = pre[0].text if pre else ""
        self.check.log(f"preview rows: {sorted(rows)}")
        for family, language in (("en", "English"), ("de", "German"), ("zh", "Traditional Chinese"), ("fr", "English (fr falls back)")):
            found = {k: v for k, v in rows.items() if k and k.split("-")[0].lower() == family}
            if not found:
                if family == "fr":
                    continue  # a console may group fr under the catalog it resolves to (en)
                self.check(False, f"preview: a row for {family}", f"rows {sorted(rows)}")
                continue
            for locale, text in found.items():
                title, body = expected_alert(self.catalogs, locale)
                try:
                    payload = json.dumps(json.loads(text), ensure_ascii=False)
                except ValueError:
                    payload = None
                self.check(payload is not None and title in payload and body in payload,
                           f"preview row {locale}: the {language} title {title!r} and body {body!r}",
                           f"pre.payload {text[:300]!r}")
        kept = b.find("form#compose [name='request_id']").get_attribute("value") if b.has("form#compose [name='request_id']") else None
        self.check(kept == self.request_id, "preview: the compose form comes back filled in", f"request_id {kept!r}")
        label = b.text("#send-submit") if b.has("form#send #send-submit") else ""
        self.check(re.search(rf"\b{DEVICES}\b", label) is not None and "send" in label.lower(),
                   f"preview: the send button says 'Send to {DEVICES} devices'", f"label {label!r}")
        self.sent_at_ms = int(time.time() * 1000) - 1000
        self.sent_at = time.monotonic()
        b.click_to_next_page(b.find("#send-submit"), "#report")
        want = f"/requests/{APP}/{self.request_id}"
        self.check(b.path() == want, f"send: redirected to {want}", f"at {b.path()}")
        b.shot("request-page")

    # 4
    @step
    def request_done(self):
        b = self.browser
        if not b.path().startswith("/requests/"):
            b.go(f"/requests/{APP}/{self.request_id}")
        states = []
        deadline = time.time() + REPORT_WAIT
        state = None
        while time.time() < deadline:
            try:
                state = b.find("#report").get_attribute("data-state")
            except (NoSuchElementException, StaleElementReferenceException):
                state = None
            if state and (not states or states[-1] != state):
                states.append(state)
            if state in ("done", "dead"):
                break
            time.sleep(0.2)
        seconds = time.monotonic() - self.sent_at
        self.timings["send to done"] = seconds
        why = f"states {' -> '.join(states) or 'none'} after {seconds:.1f} s"
        if state != "done":
            status, api_report = self.api("GET", f"/api/v1/requests/{APP}/{self.request_id}")
            why += f"; GET /api/v1/requests/{APP}/{self.request_id} -> {status} {api_report}"
        self.check(state == "done", f"the request page reaches #report[data-state=done] within {REPORT_WAIT} s "
                   f"({' -> '.join(states)}, {seconds:.1f} s after send)", why)
        b.shot("request-done")
        counts = {}
        for name in ("targeted", "skipped", "batches", "sent", "delivered", "failed", "retried", "deferred", "removed"):
            counts[name] = b.text(f"#count-{name}") if b.has(f"#count-{name}") else None
        self.check.log(f"request page counts: {counts}")

        deliveries = self.sandbox_deliveries(self.sent_at_ms, self.request_id)
        delivered_tokens = {d["token"] for d in deliveries}
        self.check(counts["delivered"] == str(DEVICES) and len(delivered_tokens) == DEVICES,
                   f"#count-delivered ({counts['delivered']}) = the device count ({DEVICES}) = distinct tokens apns-sandbox "
                   f"received with apns-collapse-id {self.request_id} ({len(delivered_tokens)})",
                   f"{len(deliveries)} sandbox deliveries")
        self.check(delivered_tokens == set(self.tokens), "apns-sandbox got exactly the topic's tokens (not the other topic's)",
                   f"missing {len(set(self.tokens) - delivered_tokens)}, extra {len(delivered_tokens - set(self.tokens))}")
        self.check(counts["targeted"] == str(DEVICES) and counts["failed"] == "0",
                   f"#count-targeted {DEVICES}, #count-failed 0", f"counts {counts}")
        wrong = []
        for d in deliveries:
            title, body = expected_alert(self.catalogs, self.locale.get(d["token"], "en"))
            text = json.dumps(d.get("payload"), ensure_ascii=False)
            if title not in text or body not in text:
                wrong.append(f"{self.locale.get(d['token'])}: {text[:160]}")
        self.check(deliveries and not wrong, "every delivered payload is in its device's language (server localization)",
                   "; ".join(wrong[:3]))
        first_last = [b.text(c) if b.has(c) else None for c in ("#first-delivery", "#last-delivery")]
        self.check(all(first_last), "#first-delivery and #last-delivery are shown", f"{first_last}")

        b.click_to_next_page(b.find("a#nav-requests"), "table#requests")
        # The list reloads itself every few seconds: read it in one script, again if a reload was under way.
        listing = None
        for _ in range(10):
            try:
                listing = b.driver.execute_script(REQUESTS_LISTING, self.request_id)
                break
            except WebDriverException:
                time.sleep(0.3)
        row = (listing or {}).get("row")
        self.check(bool(row) and row.get("app") == APP and row.get("state") == "done", "the request is listed in /requests as done",
                   f"row {row}" if row else f"rows {(listing or {}).get('ids', [])[:10]}")
        self.check(bool(row) and any(self.request_id in urllib.parse.unquote(h or "") for h in row.get("hrefs", [])),
                   "its /requests row links to its page", f"links {row and row.get('hrefs')}")
        b.shot("requests")

    # 5
    @step
    def dead_letter_and_replay(self):
        b = self.browser
        admin = self.stack.port["admin"]
        target = self.tokens[1]
        http_json(admin, "PUT", "/faults", {"status": 500, "rate": 1.0})
        try:
            b.click_to_next_page(b.find("a#nav-compose"), "form#compose")
            form = b.find("form#compose")
            for name, value in (("app", APP), ("target_kind", "tokens"), ("target", target),
                                ("request_id", self.dead_request_id), ("title", "Console check"),
                                ("body", "dead letter and replay"), ("localize", "device")):
                b.fill(form, name, value)
            b.click_to_next_page(b.find("#preview-submit"), "#preview")
            targets = b.text("#preview-targets")
            self.check(targets == "1", "a push to one token: #preview-targets is 1", f"{targets!r}")
            b.click_to_next_page(b.find("#send-submit"), "#report")
            b.shot("dead-request-sent")

            def dead_rows():
                b.go("/dead")
                b.wait("table#dead")
                return b.finds("table#dead tr.dead-letter")

            rows = wait_for(dead_rows, 30, step=1)
            b.shot("dead-letters")
        finally:
            http_json(admin, "DELETE", "/faults")
        self.check(bool(rows), "with the sandbox answering 500, the push is dead-lettered and shows in /dead",
                   f"{len(rows or [])} rows")
        if not rows:
            return
        mine = [r for r in rows if self.dead_request_id in cell(r, "td.body") or target in cell(r, "td.body")]
        if not mine and len(rows) == 1:
            self.check.log("the /dead row's body names neither the request id nor the token; taking the only row")
            mine = rows
        self.check(len(mine) == 1, "exactly one dead letter is this push's", f"{len(mine)} of {len(rows)} rows")
        if not mine:
            return
        row = mine[0]
        key = row.get_attribute("data-key")
        reason = cell(row, "td.reason")
        source = cell(row, "td.source")
        self.check.log(f"dead letter {key!r}: reason {reason!r}, source {source!r}")
        self.check(bool(key) and re.search(r"InternalServerError|500|attempt", reason, re.I) is not None,
                   f"its row has a key and the reason push-send gave ({reason!r})", f"data-key {key!r}, td.reason {reason!r}")
        # push-send publishes its dead letters itself (no x-death header): the console infers the
        # queue from the body and shows it in parentheses.
        self.check(source.strip("()") == "push.send", f"its source is push.send (td.source {source!r})", f"td.source {source!r}")
        status, body = self.api("GET", "/api/v1/dead")
        letters = [d for d in (body or {}).get("dead_letters", []) if d.get("key") == key] if isinstance(body, dict) else []
        self.check(status == 200 and len(letters) == 1 and letters[0].get("reason") == reason
                   and "push.send" in (letters[0].get("source"), letters[0].get("target")),
                   "GET /api/v1/dead (bearer key) lists it with the same reason and push.send",
                   f"HTTP {status}, {str(letters or body)[:300]}")

        # Its request page counts it as failed (the request has ended: nothing more will happen).
        b.go(f"/requests/{APP}/{self.dead_request_id}")
        b.wait("#report")
        state = wait_for(lambda: b.find("#report").get_attribute("data-state") in ("done", "dead")
                         and b.find("#report").get_attribute("data-state"), 20)
        failed = b.text("#count-failed") if b.has("#count-failed") else None
        reasons = [r.get_attribute("data-reason") for r in b.finds("table#failures tr[data-reason]")]
        self.check(state == "done" and failed == "1" and len(reasons) == 1,
                   f"its request page: done, #count-failed 1, a failure row ({reasons})",
                   f"state {state!r}, #count-failed {failed!r}, reasons {reasons}")
        b.shot("dead-request-page")

        b.go("/dead")
        b.wait("table#dead")
        buttons = b.finds(f"table#dead tr.dead-letter[data-key='{key}'] form.replay button.replay-submit")
        if not self.check(bool(buttons), "the dead letter has a replay button"):
            return
        replayed_at = int(time.time() * 1000) - 1000
        b.click_to_next_page(buttons[0], "table#dead, #notice, #error")
        notice = b.text("#notice") if b.has("#notice") else ""
        error = b.text("#error") if b.has("#error") else ""
        self.check("replayed 1 dead letter to push.send" in notice, "replay: #notice 'replayed 1 dead letter to push.send'",
                   f"#notice {notice!r}, #error {error!r}, at {b.path()}")
        self.check(not b.finds(f"table#dead tr.dead-letter[data-key='{key}']"), "replay: the letter is gone from /dead")
        b.shot("dead-replayed")
        got = wait_for(lambda: [d for d in self.sandbox_deliveries(replayed_at, self.dead_request_id) if d["token"] == target], 30)
        self.check(bool(got), "the replayed push reached apns-sandbox (its token, the request's apns-collapse-id)",
                   f"no delivery to {target[:16]}… with apns-collapse-id {self.dead_request_id} within 30 s")

    # 6
    @step
    def tokens_page(self):
        b = self.browser
        token = self.tokens[2]

        def lookup():
            form = b.find("form#token-lookup")
            b.fill(form, "app", APP)
            b.fill(form, "token", token)
            b.click_to_next_page(b.find("#lookup-submit"), "#token-record, #error, #notice, form#token-lookup")

        b.click_to_next_page(b.find("a#nav-tokens"), "form#token-lookup")
        lookup()
        record_text = self.token_record()
        try:
            record = json.loads(record_text)
        except ValueError:
            record = {}
        self.check(record.get("token") == token and record.get("locale") == self.locale[token] and TOPIC in record.get("topics", []),
                   f"token lookup shows its record (locale {self.locale[token]}, topic {TOPIC})", f"#token-record {record_text[:300]!r}")
        b.shot("token-record", focus="#token-record")
        if not b.has("form#token-delete #delete-submit"):
            self.check(False, "the record has a delete button (form#token-delete)")
            return
        b.click_to_next_page(b.find("form#token-delete #delete-submit"), "#notice, #error, form#token-lookup")
        notice = b.text("#notice") if b.has("#notice") else ""
        error = b.text("#error") if b.has("#error") else ""
        self.check(bool(notice) and not error, "delete: #notice", f"#notice {notice!r}, #error {error!r}")
        b.shot("token-deleted")
        reply = call(self.stack.port["push-ingest"], "GET", f"/v1/apps/{APP}/devices/{token}",
                     headers={"Authorization": f"Bearer {self.stack.ingest_key}"}, timeout=10)
        self.check(reply.status == 404, "push-ingest no longer has the device (GET answers 404)", f"HTTP {reply.status}")
        if not b.has("form#token-lookup"):
            b.click_to_next_page(b.find("a#nav-tokens"), "form#token-lookup")
        lookup()
        shown = " ".join(b.text(c) for c in ("#token-not-found", "#error", "#notice") if b.has(c))
        self.check(not self.token_record() and re.search(r"not found|no device", shown, re.I) is not None,
                   f"a second lookup says not found ({shown!r})", f"#token-not-found/#error/#notice {shown!r}, "
                   f"#token-record {self.token_record()[:100]!r}")
        b.shot("token-not-found")

    def token_record(self):
        """The record JSON of #token-record (a pre, or an element holding one); '' when none."""
        found = self.browser.finds("#token-record")
        if not found:
            return ""
        if found[0].tag_name == "pre":
            return found[0].text
        pre = found[0].find_elements(By.CSS_SELECTOR, "pre")
        return pre[0].text if pre else ""

    # 7
    @step
    def json_api(self):
        b = self.browser
        status, body = self.api("GET", "/api/v1/status")
        queues = {q.get("name"): q for q in (body or {}).get("queues", [])} if isinstance(body, dict) else {}
        send = queues.get("push.send", {})
        self.check(status == 200 and int(send.get("consumers") or 0) >= 1,
                   f"GET /api/v1/status with the bearer key: push.send has {send.get('consumers')} consumer(s)",
                   f"HTTP {status}, {str(body)[:300]}")
        self.check("push.dead" in queues and isinstance(body.get("apps"), list) and any(a.get("app") == APP for a in body["apps"]),
                   "it lists push.dead and the app", f"queues {sorted(queues)}")
        no_key, _ = self.api("GET", "/api/v1/status", key="")
        wrong_key, _ = self.api("GET", "/api/v1/status", key=self.stack.api_key + "x")
        self.check(no_key in (401, 403) and wrong_key in (401, 403), "GET /api/v1/status without a key or with a wrong one is refused",
                   f"HTTP {no_key} and {wrong_key}")
        status, report = self.api("GET", f"/api/v1/requests/{APP}/{urllib.parse.quote(self.request_id)}")
        self.check(status == 200 and isinstance(report, dict) and report.get("state") == "done" and report.get("delivered") == DEVICES,
                   f"GET /api/v1/requests/{{app}}/{{id}}: done, {DEVICES} delivered", f"HTTP {status}, {str(report)[:300]}")
        b.click_to_next_page(b.find("a#nav-status"), "table#queues")
        listed = [r.get_attribute("data-queue") for r in b.finds("table#queues tr[data-queue]")]
        self.check({"push.send", "push.dead"} <= set(listed) and b.has(f"table#apps tr[data-app='{APP}']"),
                   "the /status page lists the queues (push.send, push.dead) and the app", f"queues {listed}")
        b.shot("status")

    # 8
    @step
    def logout(self):
        b = self.browser
        b.click_to_next_page(b.find("form#logout #logout-submit"), "form#login")
        self.check(b.path() == "/login", "logout lands on /login", f"at {b.path()}")
        b.shot("logged-out")
        b.go("/requests")
        b.wait("form#login")
        self.check(b.path() == "/login" and not b.has("#operator"), "after logout /requests asks for a login again", f"at {b.path()}")
        b.shot("after-logout")

    # 9
    def console_log(self):
        """Every action logged with push.operator and push.action; no secret in any log."""
        wanted = ("login", "preview", "send", "replay", "delete", "logout")

        def missing():
            # The processes still run: the last action's line may take a moment to reach the file.
            actions = [(r.get("push.action"), r.get("push.operator"), r.get("level"))
                       for r in self.stack.log_records("push-console") if r.get("push.action")]
            names = " ".join(str(a) for a, operator, _ in actions if operator == OPERATOR).lower()
            return actions, [a for a in wanted if a not in names]

        wait_for(lambda: not missing()[1], 5, step=0.2)
        actions, absent = missing()
        self.check.log(f"push-console logged actions: {actions}")
        self.check(not absent, "push-console logged every action with push.operator and push.action", f"none for {absent}")
        logs = [p for p in self.stack.out.glob("*.log") if p.name != "chromedriver.log"]
        leaked = [p.name for p in logs
                  if self.stack.password in p.read_text(errors="replace") or self.stack.api_key in p.read_text(errors="replace")]
        self.check(not leaked, f"neither the password nor the API key is in the services' logs ({len(logs)})", f"in {leaked}")


# --- the fixtures and the tests, in the scenario's order -------------------------------------------

@pytest.fixture(scope="module")
def console_stack(bin_dir):
    if not (bin_dir / "push-console").exists():
        pytest.exit(f"--bin-dir {bin_dir} lacks push-console (swift build first)", returncode=3)
    yield from serve(ConsoleStack(bin_dir))


@pytest.fixture(scope="module")
def browser(console_stack, request):
    b = Browser(console_stack)
    # Registered before the start: chromedriver's group goes whatever happens from here on.
    request.addfinalizer(b.quit)
    try:
        b.start()
    except SetupError as error:
        pytest.exit(f"the browser did not start: {error} (logs in {console_stack.out})", returncode=3)
    say(f"Chromium {b.version}, 1280x900, headless; console on 127.0.0.1:{CONSOLE_PORT}")
    return b


@pytest.fixture(scope="module")
def scenario(console_stack, browser):
    state = Scenario(console_stack, browser)
    yield state
    timings = ", ".join(f"{k} {v:.1f} s" for k, v in state.timings.items())
    say(f"screenshots: {console_stack.shots}; logs: {console_stack.out}" + (f"; {timings}" if timings else ""))


@pytest.fixture
def console(scenario, checks):
    """The scenario, its checks counted in the running test."""
    scenario.check = checks
    return scenario


@pytest.fixture
def operator(console):
    """The scenario with the operator logged in by test_login (its steps mean nothing without): a
    step is skipped after a login that failed (test_login says why) and fails when `-k` left the
    login out, rather than passing having checked nothing."""
    if console.logged_in is None:
        pytest.fail("needs test_login, which -k left out (select it too: -k 'login or …')")
    if not console.logged_in:
        pytest.skip("needs the login of test_login, which failed")
    return console


def test_operator_hashes(console):
    console.operator_hashes()


def test_register_devices(console):
    console.register_devices()


def test_login(console):
    console.login()


def test_compose_preview_send(operator):
    operator.compose_and_send()


def test_delivery_report(operator):
    operator.request_done()


def test_dead_letter_and_replay(operator):
    operator.dead_letter_and_replay()


def test_token_lookup_and_delete(operator):
    operator.tokens_page()


def test_json_api(operator):
    operator.json_api()


def test_logout(operator):
    operator.logout()


def test_console_log(console):
    console.console_log()
