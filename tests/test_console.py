"""The live web console (issue 12) on the real agent: real uvicorn, real models, headless Chromium.

One agent per module: the ``run`` pipeline (:func:`~agent.pipeline.pipeline.live_pipeline`)
on fake sound devices that keep real time, the simulated robot, and the console's server on
a free localhost port; with the test data's video as the camera. The
browser tests drive Debian's ``chromium`` through ``chromium-driver`` (Selenium) and skip
with the reason where either is missing. Screenshots go to the test's tmp folder and to
``out/console/`` (git-ignored).
"""

from __future__ import annotations

import json
import shutil
import socket
import statistics
import urllib.error
import urllib.request
from pathlib import Path
from types import SimpleNamespace

import pytest
from waiting import wait_until

from agent.audio_io.fake import FakeBackend
from agent.config import ConsoleConfig, load_config
from agent.console import Console
from agent.console.hub import dumps
from agent.events import PauseVerdict, Timing, ToolCall, ToolResult, Transcript
from agent.pipeline import Bus, build_core
from agent.pipeline.pipeline import live_pipeline
from tools.bench.latency import EventLog

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "out" / "console"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
TURN_S = 90.0


def _video(fixtures: Path | None) -> Path | None:
    if fixtures is None:
        return None
    for cand in (fixtures / "video" / "short_hamilton_clip.mp4", fixtures / "short_hamilton_clip.mp4"):
        if cand.is_file():
            return cand
    return None


@pytest.fixture(scope="module")
def live():
    """The agent of ``bolt-agent run --console`` on fake sound devices, console on a free port."""
    from conftest import find_fixtures

    cfg = load_config()
    video = _video(find_fixtures())
    if video is not None:
        cfg.camera.source = str(video)
    log = EventLog()
    console = Console(ConsoleConfig(queue_events=64))
    server = console.serve("127.0.0.1", 0)
    bus = Bus(console.tee(log))  # as run does: the printer's emit teed into the console
    core = build_core(cfg, bus.publish)
    core.warmup()
    pipeline = live_pipeline(core, bus, FakeBackend())
    pipeline.start()
    console.attach(core, bus, pipeline)
    yield SimpleNamespace(
        console=console,
        server=server,
        url=server.url,
        log=log,
        bus=bus,
        core=core,
        pipeline=pipeline,
        camera=video,
    )
    console.close()
    pipeline.close()
    core.close()


def http(url, method="GET", body=None, headers=None, timeout=10.0):
    """(status, headers, body bytes) of one request; HTTP errors are answers, not exceptions."""
    data = json.dumps(body).encode() if isinstance(body, dict) else body
    hdrs = {"Content-Type": "application/json"} if isinstance(body, dict) else {}
    hdrs.update(headers or {})
    req = urllib.request.Request(url, data=data, method=method, headers=hdrs)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return (
                r.status,
                r.headers,
                r.read(200_000) if "event-stream" not in r.headers.get("content-type", "") else r.read(40),
            )
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read()


def wait_turn(live, start: int, timeout: float = TURN_S) -> Timing:
    """The next turn's ``timing`` after index ``start`` of the event log."""
    ev = live.log.wait_for(lambda e: isinstance(e, Timing), start, timeout)
    assert ev is not None, "no turn finished in time"
    live.pipeline.wait_idle(10.0)
    return ev


# --- in a real browser -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def browser(live):
    if not (CHROMIUM and CHROMEDRIVER):
        pytest.skip("needs Debian's chromium and chromium-driver (launch/setup.sh test installs them)")
    webdriver = pytest.importorskip("selenium.webdriver", reason="needs selenium (pip install -e .[test])")
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--window-size=1400,1700",
    ):
        opts.add_argument(arg)
    drv = webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
    drv.set_page_load_timeout(30)
    yield drv
    drv.quit()


def shot(drv, tmp_path: Path, name: str) -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    path = tmp_path / f"{name}.png"
    assert drv.save_screenshot(str(path))
    shutil.copy(path, OUT / path.name)


def until(drv, cond, timeout: float = TURN_S, what: str = ""):
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(drv, timeout, poll_frequency=0.05).until(lambda d: cond(d), message=what)


def text_of(drv, css: str) -> str:
    from selenium.webdriver.common.by import By

    return " ".join(e.text for e in drv.find_elements(By.CSS_SELECTOR, css))


@pytest.fixture
def page(browser, live):
    """The console page, open and live; closed again after the test (it is a client of the stream)."""
    browser.get(live.url)
    until(
        browser, lambda d: "live" in text_of(d, "#conn") and text_of(d, ".joint"), 30, "page did not go live"
    )
    yield browser
    browser.get("about:blank")


def test_page_shows_a_typed_turn_its_tool_call_and_the_joints_moving(live, page, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    drv = page
    assert "llm" in text_of(drv, "#models") and "smollm2" in text_of(drv, "#models")
    assert "memory" in text_of(drv, "#memory").lower() or "plan" in text_of(drv, "#memory").lower()
    assert {e.get_attribute("data-joint") for e in drv.find_elements(By.CSS_SELECTOR, ".joint")} >= {
        "right_arm",
        "head_yaw",
    }
    assert "wave" in text_of(drv, "#anim-select")
    shot(drv, tmp_path, "01-loaded")

    driver_log = live.core.robot.driver.commands
    n0, start = len(driver_log), len(live.log.events)
    box = drv.find_element(By.ID, "say-text")
    box.send_keys("wave your right hand", Keys.ENTER)
    seen: dict[str, set[str]] = {}
    bars = "return [...document.querySelectorAll('.joint')].map(e => [e.dataset.joint, e.dataset.deg])"

    def progressed(d) -> bool:
        for joint, deg in d.execute_script(bars):
            seen.setdefault(joint, set()).add(deg)
        return (
            "wave your right hand" in text_of(d, ".you .text")
            and d.find_elements(By.CSS_SELECTOR, '.tool[data-tool="wave"]')
            and any(len(v) >= 4 for v in seen.values())
        )

    try:
        until(drv, progressed, what="transcript, wave call and moving joint bars not all shown")
    except Exception:
        shot(drv, tmp_path, "02-failed")
        print(seen, [e.to_json() for e in live.log.events[start:] if e.name != "robot"])
        raise
    # The 135M model may pick the other hand (the camera's scene is in its prompt): follow the call.
    call = live.log.wait_for(lambda e: isinstance(e, ToolCall) and e.tool == "wave", start, 1)
    arm = f"{call.arguments.get('hand', 'right')}_arm"
    until(drv, lambda d: progressed(d) and len(seen[arm]) >= 4, 10, f"the {arm} bar did not move")
    assert any(j == arm for _, j, _ in list(driver_log)[n0:]), f"the simulated driver got no {arm} command"
    shot(drv, tmp_path, "02-waving")
    assert live.log.wait_for(lambda e: isinstance(e, Transcript) and "wave" in e.text, start, 1)
    wait_turn(live, start)
    until(drv, lambda d: d.find_elements(By.CSS_SELECTOR, "#waterfall .wf-row"), 10, "no latency waterfall")
    until(drv, lambda d: d.find_elements(By.CSS_SELECTOR, "#history circle"), 10, "no voice-to-voice history")
    assert "result" in text_of(drv, '.tool[data-tool="wave"]')
    assert "ms" in text_of(drv, '.tool[data-tool="wave"] .res')  # with the call's duration
    if live.camera is not None:
        until(drv, lambda d: "people" in text_of(d, "#scene"), 20, "no scene summary")
        until(drv, lambda d: d.execute_script("return document.getElementById('frame').naturalWidth") > 0, 10)
    shot(drv, tmp_path, "03-turn-done")


def test_page_shows_each_pause_verdict_and_the_signal_that_decided(live, page):
    """Issue 21 (4): a pause's verdict, its rule and both signals' figures are on the page."""
    drv = page
    live.bus.publish(
        PauseVerdict(-1, 7, "um let me think", False, "hesitation", smart_turn=0.43, text_score=-1.08)
    )
    line = (
        'pause 7: "um let me think" → wait for more (only a hesitation so far; words -1.08, Smart Turn 0.43)'
    )
    until(drv, lambda d: text_of(d, "#partial") == line, 10, f"no verdict line: {text_of(drv, '#partial')!r}")
    live.bus.publish(PauseVerdict(-1, 8, "Wave your right hand.", True, "text", text_score=-0.31))
    until(
        drv,
        lambda d: (
            text_of(d, "#partial")
            == 'pause 8: "Wave your right hand." → turn over (the words end a sentence; words -0.31)'
        ),
        10,
        "no second verdict line",
    )
    misheard = PauseVerdict(
        -1,
        9,
        "come your way",
        True,
        "text",
        text_score=-1.01,
        asr_logprob=-0.54,
        unclear=True,
        confirm_ms=1400,
    )
    live.bus.publish(misheard)
    line = (
        'pause 9: "come your way" → turn over (the words end a sentence; words -1.01, unclear words, '
        "logprob -0.54) - heard after 1400 ms of silence"
    )
    until(
        drv,
        lambda d: text_of(d, "#partial") == line,
        10,
        f"no doubtful verdict: {text_of(drv, '#partial')!r}",
    )


def test_estop_button_latches_the_robot_and_clear_releases_it(live, page, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import Select

    drv, robot = page, live.core.robot
    drv.find_element(By.ID, "btn-estop").click()
    until(drv, lambda d: "E-STOP LATCHED" in text_of(d, "#estop-state"), 10, "e-stop not shown")
    assert robot.estopped and not robot.torque_on
    shot(drv, tmp_path, "04-estop")

    n0, start = len(robot.driver.commands), len(live.log.events)
    Select(drv.find_element(By.ID, "anim-select")).select_by_visible_text("nod")
    drv.find_element(By.ID, "anim-play").click()
    until(
        drv,
        lambda d: "emergency stop is on" in text_of(d, "#control-msg"),
        10,
        "a refused animation is not reported",
    )
    drv.find_element(By.ID, "say-text").send_keys("wave your right hand", Keys.ENTER)
    wait_turn(live, start)
    calls = [e for e in live.log.events[start:] if isinstance(e, ToolCall)]
    results = [e for e in live.log.events[start:] if isinstance(e, ToolResult)]
    assert all(not r.ok for r in results if r.tool in ("wave", "nod", "look", "dance", "play_animation")), (
        results
    )
    assert robot.command({"right_arm": 90.0}) == {}
    assert len(robot.driver.commands) == n0, f"joint commands reached the driver while latched ({calls})"
    shot(drv, tmp_path, "05-estop-refuses")

    drv.find_element(By.ID, "btn-clear").click()
    until(drv, lambda d: "motors on" in text_of(d, "#estop-state"), 10, "clear not shown")
    assert not robot.estopped and robot.torque_on
    drv.find_element(By.ID, "anim-play").click()
    until(drv, lambda d: len(robot.driver.commands) > n0, 10, "no joint command after clear")
    until(drv, lambda d: "playing nod" in text_of(d, "#playing") or robot.playing is None, 5)
    robot.wait_idle(10)
    shot(drv, tmp_path, "06-cleared")


def test_mute_button_silences_the_microphone(live, page):
    from selenium.webdriver.common.by import By

    drv = page
    drv.find_element(By.ID, "btn-mute").click()
    until(drv, lambda d: "MUTED" in text_of(d, "#mic-state"), 10, "mute not shown")
    assert live.pipeline.muted and live.pipeline.source.muted
    drv.find_element(By.ID, "btn-mute").click()
    until(drv, lambda d: "mic on" in text_of(d, "#mic-state"), 10, "unmute not shown")
    assert not live.pipeline.muted


@pytest.fixture
def reachy_console():
    """A console over a Reachy Mini body (launch/reachy_mini_sim.toml's joints, postures and
    Pollen's dances) on a simulated driver: no daemon and no models; joint commands reach the
    console's feed as the agent's ``robot`` events do."""
    from agent.events import RobotCommand
    from agent.memplan import BudgetVerdict
    from hardware.factory import load_libraries
    from hardware.joints import Joint
    from hardware.robot import Robot
    from hardware.servos.sim import SimulatedDriver

    cfg = load_config(ROOT / "launch" / "reachy_mini_sim.toml")
    libraries, _ = load_libraries(cfg.robot)
    if not libraries["dances"]:
        pytest.skip("needs reachy-mini-dances-library (pip install -e .[reachy])")
    console = Console(ConsoleConfig(queue_events=256))
    server = console.serve("127.0.0.1", 0)
    driver = SimulatedDriver(on_command=lambda j, deg, t: console.feed(RobotCommand(-1, j, deg, t)))
    joints = [Joint(j.name, j.min_deg, j.max_deg, j.neutral_deg, j.max_speed_dps) for j in cfg.robot.joints]
    robot = Robot(joints, driver, {}, postures=cfg.robot.postures, libraries=libraries)
    core = SimpleNamespace(cfg=cfg, robot=robot, vision=None)
    pipeline = SimpleNamespace(muted=False, can_mute=False, interrupt=lambda reason: None)
    console.attach(core, Bus(console.tee(lambda ev: None)), pipeline, BudgetVerdict(True, "no plan needed"))
    yield SimpleNamespace(console=console, url=server.url, robot=robot)
    console.close()
    robot.close()


def test_page_shows_a_reachy_minis_joints_in_their_units_and_a_dance(reachy_console, browser, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    drv, robot = browser, reachy_console.robot
    drv.get(reachy_console.url)
    try:
        until(
            drv, lambda d: "live" in text_of(d, "#conn") and text_of(d, ".joint"), 30, "page did not go live"
        )
        rows = {e.get_attribute("data-joint"): e for e in drv.find_elements(By.CSS_SELECTOR, ".joint")}
        assert list(rows) == [j.name for j in robot.joints.values()] and len(rows) == 9
        assert {n for n, e in rows.items() if e.get_attribute("data-unit") == "mm"} == {
            "head_x",
            "head_y",
            "head_z",
        }
        assert rows["head_z"].get_attribute("title") == "-45..20 mm"
        assert rows["left_antenna"].get_attribute("title") == "-175..175 deg"
        assert "sim online" in text_of(drv, "#driver-state") and "posture idle" in text_of(drv, "#body-state")
        groups = [
            g.get_attribute("label") for g in drv.find_elements(By.CSS_SELECTOR, "#anim-select optgroup")
        ]
        assert groups == ["dances"]  # no packaged animation fits this body; no emotions downloaded here
        shot(drv, tmp_path, "07-reachy-loaded")

        robot.set_posture("listening")
        Select(drv.find_element(By.ID, "anim-select")).select_by_visible_text("chicken_peck")
        drv.find_element(By.ID, "anim-play").click()
        seen: dict[str, set[str]] = {}
        bars = "return [...document.querySelectorAll('.joint')].map(e => [e.dataset.joint, e.dataset.deg])"

        def dancing(d) -> bool:
            for joint, deg in d.execute_script(bars):
                seen.setdefault(joint, set()).add(deg)
            return (
                "playing chicken_peck" in text_of(d, "#playing")
                and "moving" in text_of(d, "#body-state")
                and "posture listening" in text_of(d, "#body-state")
                and sum(len(v) >= 4 for v in seen.values()) >= 3
            )

        until(drv, dancing, 20, "the dance, the posture and moving joint bars not all shown")
        values = drv.execute_script(
            "return Object.fromEntries([...document.querySelectorAll('.joint')]"
            ".map(e => [e.dataset.joint, e.querySelector('.deg').textContent]))"
        )
        assert values["head_z"].endswith(" mm") and values["right_antenna"].endswith("°"), values
        shot(drv, tmp_path, "08-reachy-dancing")
        robot.stop()
        until(drv, lambda d: "still" in text_of(d, "#body-state"), 10, "the end of the motion not shown")
    finally:
        drv.get("about:blank")


# --- access -------------------------------------------------------------------------------------------

CONTROLS = ("/api/say", "/api/mute", "/api/animate", "/api/estop", "/api/clear")


def test_non_local_bind_needs_the_token_for_page_stream_and_controls(live):
    robot = live.core.robot
    server = live.console.serve("0.0.0.0", 0, token="right-token")
    base = f"http://127.0.0.1:{server.port}"
    try:
        for token in (None, "wrong-token"):
            auth = {"Authorization": f"Bearer {token}"} if token else {}
            for path in ("/", "/api/events", "/api/state", "/api/frame.jpg", "/static/console.js"):
                assert http(base + path, headers=auth)[0] == 401, (path, token)
            for path in CONTROLS:
                assert http(base + path, "POST", {}, headers=auth)[0] == 401, (path, token)
            cookie = {"Cookie": f"bolt_console={token}"} if token else {}
            assert http(base + "/api/estop", "POST", {}, headers=cookie)[0] == 401
        assert not robot.estopped
        status, _, page = http(base + "/", headers={"Accept": "text/html"})
        assert status == 401 and b'name="token"' in page  # the login form

        ok = {"Authorization": "Bearer right-token"}
        assert http(base + "/", headers=ok)[0] == 200
        status, hdrs, first = http(base + "/api/events", headers=ok)
        assert status == 200 and "text/event-stream" in hdrs["content-type"] and first.startswith(b"retry:")
        assert json.loads(http(base + "/api/state", headers=ok)[2])["info"]["joints"]
        assert http(base + "/api/mute", "POST", {"muted": False}, headers=ok)[0] == 200
        for path in CONTROLS:
            assert http(base + path, headers=ok)[0] == 405, path  # no control is a GET
        assert http(base + "/api/say", "POST", b"text=hi", headers=ok)[0] == 415
        evil = {**ok, "Origin": "http://evil.example"}
        assert http(base + "/api/mute", "POST", {"muted": False}, headers=evil)[0] == 403

        # The login form: a wrong token is refused, the right one sets a cookie that works.
        form = {"Content-Type": "application/x-www-form-urlencoded"}
        assert http(base + "/login", "POST", b"token=nope", headers=form)[0] == 401
        opener = urllib.request.build_opener(NoRedirect)
        req = urllib.request.Request(base + "/login", data=b"token=right-token", headers=form, method="POST")
        try:
            opener.open(req)
            raise AssertionError("login did not redirect")
        except urllib.error.HTTPError as e:
            assert e.code == 303
            cookie = e.headers["set-cookie"]
        assert "HttpOnly" in cookie and "SameSite=strict" in cookie.replace("Strict", "strict")
        jar = {"Cookie": cookie.split(";")[0]}
        assert http(base + "/", headers=jar)[0] == 200
        assert http(base + "/api/mute", "POST", {"muted": False}, headers=jar)[0] == 200
    finally:
        server.stop()
        live.console.servers.remove(server)


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


def test_controls_are_rate_limited_but_the_emergency_stop_never_is(live):
    robot = live.core.robot
    answers = [http(live.url + "api/mute", "POST", {"muted": False})[0] for _ in range(40)]
    assert answers[0] == 200 and 429 in answers
    try:
        assert all(http(live.url + "api/estop", "POST", {})[0] == 200 for _ in range(5))
        assert robot.estopped
    finally:
        # Refused requests take no token: the clear goes through once the bucket has refilled.
        assert wait_until(lambda: http(live.url + "api/clear", "POST", {})[0] == 200, 10, step=0.2)
    assert not robot.estopped


def test_localhost_console_answers_only_localhost_names(live):
    port = live.server.port
    assert http(f"http://127.0.0.1:{port}/api/state")[0] == 200
    assert http(f"http://127.0.0.1:{port}/api/state", headers={"Host": f"localhost:{port}"})[0] == 200
    assert http(f"http://127.0.0.1:{port}/api/state", headers={"Host": f"evil.example:{port}"})[0] == 403


# --- a hung browser never slows the agent -------------------------------------------------------------


def stuck_stream(port: int) -> socket.socket:
    """A client that asks for the event stream and never reads a byte."""
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 2048)
    s.connect(("127.0.0.1", port))
    s.sendall(f"GET /api/events HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode())
    return s


SAY = {"text": "wave your right hand"}


def turns(live, n: int) -> list[float]:
    out = []
    for _ in range(n):
        start = len(live.log.events)
        # Sent as a client that honours 429 would: an earlier test may have spent the bucket.
        assert wait_until(lambda: http(live.url + "api/say", "POST", SAY)[0] == 200, 10, step=0.2)
        out.append(wait_turn(live, start).first_audio_ms)
    return out


def test_a_client_that_never_reads_does_not_delay_turns(live):
    hub = live.console.hub
    filler = dumps({"event": "notice", "turn_id": -1, "message": "x" * 2000})
    turns(live, 1)  # warm
    base: list[float] = []
    stuck: list[float] = []
    for _ in range(3):  # interleaved: the growing history slows later turns in both conditions alike
        base += turns(live, 1)
        before = hub.clients
        hung = hub.connect(None)  # never taken from: its queue must stay bounded
        sock = stuck_stream(live.server.port)
        try:
            assert wait_until(lambda n=before + 2: hub.clients == n)  # the server has registered the stream
            for n in (300, 2 * hub.maxlen):  # 600 KB fill the socket's buffers; the rest must be dropped
                for _ in range(n):
                    hub.post(filler)
                # The server has taken what it could for the stream (and is stuck writing it to
                # the full socket), or the stream's queue overflowed: it no longer keeps up.
                assert wait_until(lambda: (c := hub.stats()[-1])["queued"] == 0 or c["dropped"] > 0)
            stuck += turns(live, 1)
            stats = json.loads(http(live.url + "api/state", timeout=2.0)[2])["clients"]
            assert len(hung.queue) <= hub.maxlen and hung.dropped > 0
            # The socket's stream lost messages too (so did any earlier round's, if not yet gone).
            assert sum(c["dropped"] > 0 for c in stats) >= 2, stats
        finally:
            sock.close()
            hub.disconnect(hung)
    b, s = statistics.median(base), statistics.median(stuck)
    print(f"first audio, median ms: without a stuck client {b:.0f} {base}, with {s:.0f} {stuck}")
    assert s <= 1.5 * b + 400, (base, stuck)
