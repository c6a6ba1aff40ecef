#!/usr/bin/python3
"""The agent's page in a real browser (Debian's chromium and chromium-driver, python3-selenium).

Two devices on this machine: `desk`, whose agent serves the page (`share agent --web`), and `laptop`. The laptop's
offers wait for desk's user; desk's sends to the laptop are slowed (SHARE_TEST_SEND_RATE) so that a progress bar can
be watched. The browser, headless, checks that:
  - the page without its secret serves nothing, and with it shows the devices;
  - a pending offer shows its preview image, and Accept lets the laptop's file in (then listed in the inbox, and
    opened from there with the same bytes);
  - a file dropped on the page reaches the laptop, byte for byte;
  - a bigger send shows a progress bar that moves, and Cancel stops it;
  - a page of another origin on this machine cannot cancel a job (its Origin is not this page's, and it has no
    session: the page keeps its session in the tab's own storage, never in a cookie, so a server on another port
    of 127.0.0.1 is sent no cookie at all);
  - pairing started on the page shows the code and pairs when confirmed.
Screenshots of each view go to SCREENSHOTS (printed). Every process started here is stopped here; every wait is
bounded. --demo stops after the pending offer's screenshot.

Usage: page_test.py SHARE_BINARY WORKDIR [--screenshots DIR] [--demo]
"""

import argparse
import http.server
import json
import os
import re
import signal
import struct
import subprocess
import sys
import threading
import time
import zlib
from pathlib import Path

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.common.by import By

PROCESSES = []
STARTED = time.monotonic()
# Every deadline is a quiet machine's figure times the factor the test passes on (longer under a sanitizer and on a
# busy machine), as the Swift tests' own.
PATIENCE = max(1.0, float(os.environ.get("SHARE_TEST_PATIENCE", "1")))


def log(text):
    print(f"{time.monotonic() - STARTED:6.1f} s  {text}", flush=True)


def wait_until(what, predicate, timeout=30.0, interval=0.1):
    timeout *= PATIENCE
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            value = predicate()
            if value:
                return value
        except Exception:  # an element not there yet, a file still being written
            pass
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


class Device:
    def __init__(self, share, root, name):
        self.share, self.name = share, name
        self.config = root / name
        self.run("id", "--name", name)
        self.id = self.run("id").strip().splitlines()[-1]

    def run(self, *args, check=True, timeout=60):
        done = subprocess.run(
            [self.share, *args, "--config", str(self.config)], capture_output=True, text=True,
            timeout=timeout * PATIENCE
        )
        if check and done.returncode != 0:
            raise AssertionError(f"share {' '.join(args)} failed ({done.returncode}): {done.stderr.strip()}")
        return done.stdout

    def background(self, *args, env=None, name="out"):
        out = open(self.config.parent / f"{self.name}-{name}.out", "w")
        err = open(self.config.parent / f"{self.name}-{name}.err", "w")
        process = subprocess.Popen(
            [self.share, *args, "--config", str(self.config)], stdout=out, stderr=err,
            env={**os.environ, **(env or {})},
        )
        PROCESSES.append(process)
        return process, Path(out.name), Path(err.name)

    def agent(self, *extra, env=None):
        process, out, err = self.background("agent", "--port", "0", "--no-discovery", *extra, env=env, name="agent")
        port = wait_until(
            f"{self.name}'s agent to listen",
            lambda: (m := re.search(r"listening on port (\d+)", err.read_text())) and int(m.group(1)),
        )
        return process, port, out, err


def click(driver, selector):
    """Clicks the element `selector` names, found again if the page redrew it between finding and clicking."""
    for _ in range(20):
        try:
            driver.find_element(By.CSS_SELECTOR, selector).click()
            return
        except StaleElementReferenceException:
            time.sleep(0.05)
    raise AssertionError(f"{selector} kept being redrawn")


def stop_all():
    for process in PROCESSES:
        if process.poll() is None:
            process.terminate()
    for process in PROCESSES:
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


def png(width, height):
    """A small gradient, as a real PNG."""
    rows = b"".join(
        b"\x00" + bytes(v for x in range(width) for v in (40 + x // 2, 90 + y, 160)) for y in range(height)
    )

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")


def browser(profile):
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     "--window-size=1280,1100", f"--user-data-dir={profile}", "--no-first-run"):
        options.add_argument(argument)
    driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
    driver.set_page_load_timeout(30)
    driver.set_script_timeout(30)
    return driver


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("share")
    parser.add_argument("work", type=Path)
    parser.add_argument("--screenshots", type=Path)
    parser.add_argument("--demo", action="store_true")
    args = parser.parse_args()
    work = args.work
    shots = args.screenshots or work / "screenshots"
    shots.mkdir(parents=True, exist_ok=True)

    def screenshot(driver, name):
        path = shots / f"{name}.png"
        driver.save_screenshot(str(path))
        log(f"screenshot {name}: {path}")

    desk = Device(args.share, work, "desk")
    laptop = Device(args.share, work, "laptop")
    # The laptop is trusted by desk, not one of its own: its offers wait for desk's answer.
    desk_inbox = work / "desk-inbox"
    laptop_inbox = work / "laptop-inbox"
    _, laptop_port, _, _ = laptop.agent("--inbox", str(laptop_inbox))
    desk.run("trust", "add", laptop.id, "--name", "laptop", "--address", f"127.0.0.1:{laptop_port}")
    # 8 MB/s: a 48 MiB send takes about 6 s, long enough to watch its bar move and cancel it.
    _, desk_port, desk_out, _ = desk.agent("--inbox", str(desk_inbox), "--web", env={"SHARE_TEST_SEND_RATE": "8000000"})
    laptop.run("trust", "add", desk.id, "--name", "desk", "--team", "--address", f"127.0.0.1:{desk_port}")
    address = wait_until("the page's address", lambda: re.search(r"page at (http://\S+)", desk_out.read_text()).group(1))
    base = address.split("/?")[0]
    log(f"page: {base}")

    driver = browser(work / "chromium")
    try:
        # Without the secret: nothing but a refusal.
        driver.get(base + "/")
        wait_until("the refusal", lambda: "no session" in driver.find_element(By.TAG_NAME, "body").text)
        body = driver.find_element(By.TAG_NAME, "body").text
        assert "Waiting for your answer" not in body, body
        driver.get(base + "/api/state")
        assert "no session" in driver.find_element(By.TAG_NAME, "body").text
        screenshot(driver, "0-without-the-secret")

        # With it: the page, the secret gone from the address bar, the devices listed.
        driver.get(address)
        assert "token" not in driver.current_url, driver.current_url
        wait_until("desk's name", lambda: "desk" in driver.find_element(By.ID, "me").text)
        wait_until("the laptop in the devices", lambda: "laptop" in driver.find_element(By.ID, "devices").text)
        # Among the devices heard, this one once, marked, with its ID's first group.
        mine = wait_until("this device among those heard", lambda: driver.find_element(By.CSS_SELECTOR, "#nearby .item.this"))
        assert mine.text.startswith("desk ") and mine.text.endswith("— this device"), mine.text
        assert len(driver.find_elements(By.CSS_SELECTOR, "#nearby .item.this")) == 1
        wait_until("the agent's port", lambda: str(desk_port) in driver.find_element(By.ID, "agent").text)
        screenshot(driver, "1-devices")

        # A pending offer with its preview; accepted on the page.
        source = work / "laptop-files"
        source.mkdir()
        (source / "trail-notes.txt").write_text("Trail notes: left at the second fork.\n" * 200)
        (source / "trail.png").write_bytes(png(160, 100))
        assert (source / "trail.png").stat().st_size < 32 << 10
        sender, _, sender_err = laptop.background(
            "send", str(source / "trail-notes.txt"), "--preview", str(source / "trail.png"), "--to", "desk",
            "--direct", "--answer-timeout", "90", name="send")
        offer = wait_until("the offer on the page", lambda: driver.find_element(By.CSS_SELECTOR, "#pending .offer"), 60)
        assert "laptop" in offer.text and "trail-notes.txt" in offer.text, offer.text
        image = offer.find_element(By.TAG_NAME, "img")
        wait_until("the preview to load", lambda: driver.execute_script(
            "return arguments[0].complete && arguments[0].naturalWidth", image) == 160)
        screenshot(driver, "2-pending-offer")
        if args.demo:
            return
        click(driver, "#pending .offer button.accept")
        wait_until("the laptop's send to end", lambda: sender.poll() is not None, 90)
        assert sender.returncode == 0, sender_err.read_text()
        wait_until("the file in the inbox", lambda: driver.find_element(
            By.CSS_SELECTOR, '#inbox .item[data-name="trail-notes.txt"]'))
        opened = driver.execute_async_script(
            "const done = arguments[arguments.length - 1];"
            "linkFor('laptop', 'trail-notes.txt', false).then(u => fetch(u))"
            ".then(r => r.text()).then(done, e => done('failed ' + e));")
        assert opened == (source / "trail-notes.txt").read_text(), opened[:80]
        screenshot(driver, "3-inbox")

        # A file dropped on the page reaches the laptop.
        click(driver, '#targets input[value="laptop"]')
        dropped = "Dropped on the page: a list for the weekend.\n"
        driver.execute_script(
            "const data = new DataTransfer();"
            "data.items.add(new File([arguments[0]], 'weekend.txt', {type: 'text/plain'}));"
            "document.querySelector('#drop').dispatchEvent(new DragEvent('drop', {dataTransfer: data, bubbles: true}));",
            dropped)
        wait_until("the dropped file to be listed", lambda: "weekend.txt" in driver.find_element(By.ID, "chosen").text)
        click(driver, "#send-button")
        landed = laptop_inbox / "desk" / "weekend.txt"
        wait_until("the dropped file at the laptop", lambda: landed.exists() and landed.read_text() == dropped, 60)
        delivered = wait_until("the job delivered", lambda: driver.find_element(
            By.CSS_SELECTOR, '#jobs .job[data-state="delivered"]'))
        said = delivered.find_element(By.CSS_SELECTOR, ".detail").text
        assert said.endswith(" sent") or " crossed" in said, f"a delivered job says what it sent: {said!r}"
        screenshot(driver, "4-sent")

        # A bigger send: its bar moves; Cancel stops it.
        big = work / "big.bin"
        with open(big, "wb") as out:
            out.write(os.urandom(48 << 20))
        driver.find_element(By.ID, "files").send_keys(str(big))
        wait_until("the big file to be listed", lambda: "big.bin" in driver.find_element(By.ID, "chosen").text)
        click(driver, "#send-button")
        bar = wait_until("a progress bar", lambda: driver.find_element(
            By.CSS_SELECTOR, '#jobs .job[data-state="running"] progress'), 60)
        first = float(bar.get_attribute("value"))
        later = wait_until("the bar to move", lambda: (v := float(driver.find_element(
            By.CSS_SELECTOR, '#jobs .job[data-state="running"] progress').get_attribute("value"))) > first and v, 20)
        log(f"progress bar moved from {first:.0f} to {later:.0f} bytes of {48 << 20}")
        # A queued send shows its rate and time left, as the command line does, and no earlier error under the bar.
        running = '#jobs .job[data-state="running"]'
        detail = wait_until("a rate and time left", lambda: (t := driver.find_element(
            By.CSS_SELECTOR, running + " .detail").text) and "/s" in t and " left" in t and t, 20)
        log(f"running job: {detail}")
        assert driver.find_element(By.CSS_SELECTOR, running + " .error").text == "", "a stale line under a live bar"
        screenshot(driver, "5-progress")
        click(driver, '#jobs .job[data-state="running"] button.cancel')
        wait_until("the job cancelled", lambda: driver.find_element(By.CSS_SELECTOR, '#jobs .job[data-state="cancelled"]'))
        assert not (laptop_inbox / "desk" / "big.bin").exists(), "a cancelled send left a whole file"
        screenshot(driver, "6-cancelled")

        # Another origin on this machine (same site, another port): its form carries no session (there is no cookie), and
        # refused for its Origin. The job it aims at (to a device that is away) stays queued.
        desk.run("trust", "add", Device(args.share, work, "away").id, "--name", "away", "--address", "127.0.0.1:9")
        queued = json.loads(desk.run("send", "--to", "away", "--text", "for later", "--json"
                                     ).strip().splitlines()[0]).get("job")
        assert queued, "no job queued for the away device"

        cookies_seen = []

        class Attack(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                # Whatever the browser sends to another port of 127.0.0.1: every cookie of 127.0.0.1.
                cookies_seen.append(self.headers.get("Cookie") or "")
                page = (f'<form id="f" method="POST" action="{base}/api/jobs/cancel?id={queued}"></form>'
                        '<script>document.getElementById("f").submit()</script>').encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/html")
                self.send_header("Content-Length", str(len(page)))
                self.end_headers()
                self.wfile.write(page)

            def log_message(self, *_):
                pass

        # Threads of their own: the browser keeps idle connections open, which would hold a one-thread server.
        attacker = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Attack)
        attacker.daemon_threads = True
        threading.Thread(target=attacker.serve_forever, daemon=True).start()
        try:
            driver.get(f"http://127.0.0.1:{attacker.server_port}/")
            wait_until("the attack's answer", lambda: "another site" in driver.find_element(By.TAG_NAME, "body").text)
            screenshot(driver, "7-another-origin-refused")
        finally:
            attacker.shutdown()
            attacker.server_close()
        assert cookies_seen, "the browser never reached the other port"
        assert not any(cookies_seen), f"the browser sent cookies to another port: {cookies_seen}"
        jobs = json.loads(desk.run("jobs", "--json"))
        state = next(j["state"] for j in jobs if j["id"] == queued)
        assert state == "queued", f"the attack changed the job: {state}"
        desk.run("cancel", queued)

        # Pairing started on the page: this device waits; another pairs with it; the page confirms the code.
        driver.get(base + "/")
        phone = Device(args.share, work, "tablet")
        log("pairing: page loaded")
        click(driver, "#pair-button")
        message = wait_until("the pairing port", lambda: re.search(
            r"HOST:(\d+)", driver.find_element(By.ID, "pair-state").text))
        pairer, _, pairer_err = phone.background(
            "pair", f"127.0.0.1:{message.group(1)}", "--yes", "--expect", desk.id, name="pair")
        log(f"pairing: the page waits on port {message.group(1)}")
        wait_until("the code to compare", lambda: driver.find_element(By.CSS_SELECTOR, "#pair-state .code").text)
        code = driver.find_element(By.CSS_SELECTOR, "#pair-state .code").text
        screenshot(driver, "8-pairing-code")
        click(driver, "#pair-yes")
        wait_until("the pairing to end", lambda: pairer.poll() is not None, 60)
        assert pairer.returncode == 0, pairer_err.read_text()
        assert code in pairer_err.read_text(), "the page showed another code than the other device"
        wait_until("tablet among the devices", lambda: "tablet" in driver.find_element(By.ID, "devices").text)
        log("every check passed")
    finally:
        driver.quit()


if __name__ == "__main__":
    # Stopped from outside (a test's time bound): the same clean-up as at the end.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        main()
    finally:
        stop_all()
