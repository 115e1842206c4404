"""The command line of the development tools: ``bench``, ``soak``, ``motion-bench`` and ``look-bench``.

Run as ``python -m tools.bench COMMAND ...`` from a checkout, which is what ``bolt-agent bench``,
``bolt-agent soak`` and ``bolt-agent motion-bench`` do (:mod:`agent.cli.devtools`). The commands
only parse options and print; the work is in the modules beside this one:
:mod:`~tools.bench.latency`, :mod:`~tools.bench.accuracy`, :mod:`~tools.bench.turns`,
:mod:`~tools.bench.peer`, :mod:`~tools.bench.vision_bench` (``bench``), :mod:`~tools.bench.soak` and
:mod:`~tools.bench.soak_report` (``soak``), :mod:`~tools.bench.motion` (``motion-bench``),
:mod:`~tools.bench.look_bench` (``look-bench``).
Exit codes: 0 success, 1 a failed run (a crash, an unanswered turn, a robot offline), 2 bad
options or a bad config.
"""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn, Optional

import typer

from agent.cli.common import ConfigOpt, JsonOpt, VerboseOpt, fixtures_root, load_or_exit, setup_logging
from agent.config import Config, ConfigError, load_config
from agent.stopper import Stopper

if TYPE_CHECKING:
    from hardware.robot import Robot

TEST_DATA = Path(__file__).resolve().parents[2] / "tests" / "data"
"""The checkout's test data (``commands/`` with its manifest): the default WAVs of ``bench``."""

app = typer.Typer(
    add_completion=False,
    rich_markup_mode=None,  # plain Click layout; helptext.tidy makes every text plain
    no_args_is_help=True,
    help="bolt-agent's development tools: benchmarks and the soak (a checkout's tools/bench).",
    context_settings={"help_option_names": ["-h", "--help"]},
)


def bench(
    config: ConfigOpt = None,
    fixtures: Annotated[
        Optional[Path],
        typer.Option(
            help="folder of command WAVs with manifest.json (default: $BOLT_FIXTURES/commands, else the "
            "checkout's tests/data/commands)"
        ),
    ] = None,
    runs: Annotated[int, typer.Option(min=1, help="passes over the fixtures")] = 1,
    limit: Annotated[int, typer.Option(min=0, help="use at most this many fixtures (0 = all)")] = 0,
    json_out: JsonOpt = False,
    verbose: VerboseOpt = False,
    accuracy: Annotated[
        bool,
        typer.Option(
            "--accuracy",
            help="measure tool-call accuracy and reply checks on the spoken "
            "commands (with and without ASR biasing, and as one conversation) instead of latency",
        ),
    ] = False,
    vision: Annotated[
        bool,
        typer.Option(
            "--vision",
            help='time the vision-language model ([vision] describer = "vlm"): describe time per '
            'frame, and voice-to-voice of a spoken "what do you see" (what_see.wav in the fixtures)',
        ),
    ] = False,
    frames: Annotated[int, typer.Option(min=1, help="--vision: descriptions timed")] = 5,
    turns: Annotated[
        bool,
        typer.Option(
            "--turns",
            help="play the turn-taking set (paused sentences, hesitations, plain commands in "
            "piper and espeak-ng voices; synthesized once into ~/.cache/bolt-agent/turn-set, or "
            "--fixtures DIR) and report the share kept whole, fillers answered and the extra "
            "wait of each end-of-turn rule",
        ),
    ] = False,
    realtime: Annotated[
        bool,
        typer.Option(
            "--realtime",
            help="--turns: play each file in real time to a real-time speaker (replies may start "
            "while the user goes on), instead of as fast as possible",
        ),
    ] = False,
    peer: Annotated[
        bool,
        typer.Option(
            "--peer",
            help="time the peer framework (pipecat 1.14 with its default Silero VAD + Smart Turn "
            "v3.2) on the same models and WAVs, in real time, in its own environment "
            "(~/.cache/bolt-agent/peer-venv, made from PyPI on first use); needs llama-server",
        ),
    ] = False,
    ours: Annotated[
        Optional[Path],
        typer.Option(help="--peer: our figures (the JSON of `bolt-agent bench --json`) beside the peer's"),
    ] = None,
    wake: Annotated[
        bool,
        typer.Option(
            "--wake",
            help="the wake word ([live] wake_word): detection in 14 voices in quiet and in noise, false "
            "wakes per hour on hours of speech and noise without it (synthesized once into "
            "~/.cache/bolt-agent/wake-set), and the agent's CPU in standby; with [live] wake_verify, "
            "the detector alone and with Whisper confirming its candidates",
        ),
    ] = False,
    wake_cpu_s: Annotated[
        float, typer.Option(min=0, help="--wake: seconds of standby to measure the CPU over (0: skip)")
    ] = 60.0,
    wake_sweep: Annotated[
        bool,
        typer.Option(
            help="--wake: also score every cutoff and window (and verifier delay) on the tuning set"
        ),
    ] = False,
    eot: Annotated[
        bool,
        typer.Option(
            "--eot",
            help="end-of-turn the eot-bench way: judge every pause of the turn-taking set, the held-out "
            "speakers and the shared commands once, then print false cut-offs against added latency for "
            "silence alone, Smart Turn alone and our judge (fixed, by evidence, with learned pauses)",
        ),
    ] = False,
    conversation: Annotated[
        bool,
        typer.Option(
            "--conversation",
            help="one growing conversation through the live audio path (bolt-agent run on a private "
            "PulseAudio server): held-out speakers and the shared commands; voice-to-voice per turn and "
            "its drift as the history grows",
        ),
    ] = False,
    turns_played: Annotated[
        int, typer.Option("--conversation-turns", min=3, help="--conversation: turns played")
    ] = 36,
    floor: Annotated[
        bool,
        typer.Option(
            "--floor",
            help="acknowledgements, laughs, coughs, noise and interruptions played over the robot's "
            "speech through the live audio path: stops, resumes and replies per clip",
        ),
    ] = False,
    floor_model: Annotated[
        bool,
        typer.Option(
            "--floor-model",
            help="--floor: the config's own chat model tells the story (default: a local server streams "
            "a minute-long story at 25 words/s, as the robot's GPU model would, so every clip is said "
            "over speech and the listening path has the CPU a Jetson leaves it)",
        ),
    ] = False,
) -> None:
    """Replay spoken commands through the live pipeline and a sequential baseline; report latency.

    Latency includes the floor (the unavoidable work at the model's measured raw speeds) and
    voice-to-voice over it. With ``--accuracy``: the fraction of spoken commands whose tool
    calls match the manifest, and of replies that fit (data passed on, no copy of the
    previous reply, chat answered). With ``--vision``: describe time per frame and the
    voice-to-voice time of a "what do you see" turn (first audio and the answer). With
    ``--turns``: turn-taking on paused sentences, hesitations and plain commands. With
    ``--peer``: the peer framework's voice-to-voice on the same WAVs, beside ours (``--ours``).
    """
    from tools.bench.accuracy import format_accuracy, run_accuracy
    from tools.bench.latency import format_report, run_bench

    setup_logging(verbose)
    cfg = load_or_exit(config)
    if wake:
        _bench_wake(cfg, config, json_out, wake_cpu_s, wake_sweep)
        return
    if turns:
        _bench_turns(cfg, fixtures, json_out, realtime)
        return
    folder = fixtures
    if folder is None:
        root = fixtures_root() or TEST_DATA
        folder = root / "commands" if root else None
    if eot or conversation or floor:
        _bench_floor_of_turns(cfg, config, folder, json_out, eot, conversation, turns_played, floor_model)
        return
    if vision:
        _bench_vision(cfg, folder, frames, runs, json_out)
        return
    if folder is None or not folder.is_dir():
        typer.echo("error: no fixtures folder; pass --fixtures DIR (a folder of WAV commands)", err=True)
        raise typer.Exit(2)
    if peer:
        _bench_peer(cfg, folder, limit, runs, ours, json_out)
        return
    if accuracy and not (folder / "manifest.json").is_file():
        typer.echo(f"error: {folder} has no manifest.json (file, text, expect_any per command)", err=True)
        raise typer.Exit(2)
    report: dict[str, Any] | None = None
    with Stopper() as stopper:  # a signal parks the robot, also while the models load; no report then
        if accuracy:
            report = run_accuracy(cfg, folder, stopper)
        else:
            report = run_bench(cfg, folder, runs=runs, limit=limit, stopper=stopper)
    if report is not None:
        text = format_accuracy(report) if accuracy else format_report(report)
        typer.echo(json.dumps(report) if json_out else text)


def _bench_turns(cfg: Any, folder: Optional[Path], json_out: bool, realtime: bool = False) -> None:
    """``bench --turns``: the turn-taking set through the pipeline."""
    from tools.bench.turns import format_turns, run_turns

    report = None  # stays None when a signal stopped the run
    with Stopper() as stopper:
        try:
            report = run_turns(cfg, folder, stopper, realtime=realtime)
        except RuntimeError as e:  # a synthesizer failed: nothing to measure
            typer.echo(f"error: cannot synthesize the turn-taking set: {e}", err=True)
            raise typer.Exit(2) from None
    if report is not None:
        typer.echo(json.dumps(report) if json_out else format_turns(report))


def _bench_wake(cfg: Any, config: Optional[Path], json_out: bool, cpu_s: float, sweep: bool) -> None:
    """``bench --wake``: the wake word's detection, false wakes and standby CPU (:mod:`tools.bench.wake`)."""
    from agent.config import DEFAULT_CONFIG
    from agent.config.live import WAKE_WORDS
    from agent.listening.wake_word import WakeWordError
    from agent.models import ModelNotFoundError, resolve_model
    from tools.bench.wake_report import format_wake
    from tools.bench.wake_run import run_wake

    live = cfg.live
    if live.wake_word not in WAKE_WORDS:
        typer.echo(
            f"error: bench --wake synthesizes a built-in wake word ({', '.join(WAKE_WORDS)})", err=True
        )
        raise typer.Exit(2)
    try:
        voice = resolve_model(cfg.tts.voice, "voice")
        verifier = None
        if live.wake_verify:  # the two stages, on the agent's own ASR model
            from agent.listening.wake_verify import WakeVerifier
            from agent.listening.wake_word import find_model
            from agent.speech.asr import WhisperASR

            asr = WhisperASR(resolve_model(cfg.asr.model, "ASR model"), cfg.asr)
            verifier = WakeVerifier(asr.model, find_model(live.wake_word).phrase)
        report = run_wake(
            live.wake_word,
            voice,
            config or DEFAULT_CONFIG,
            cpu_s,
            sweep,
            lambda s: typer.echo(s, err=True),
            live.wake_cutoff,
            live.wake_window,
            verifier,
            live.wake_candidate_cutoff,
            live.wake_noise_suppression,
        )
    except (RuntimeError, WakeWordError, ModelNotFoundError) as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(1) from None
    typer.echo(json.dumps(report) if json_out else format_wake(report))


def _bench_floor_of_turns(
    cfg: Any,
    config: Optional[Path],
    commands: Optional[Path],
    json_out: bool,
    eot: bool,
    conversation: bool,
    turns_played: int,
    floor_model: bool = False,
) -> None:
    """``bench --eot``, ``--conversation`` or ``--floor`` (``floor_model``: the config's model talks).

    The work is in :mod:`tools.bench.eot`, :mod:`tools.bench.live` and :mod:`tools.bench.floor_bench`;
    the live ones log the agent's stderr to ``bench-conversation.log`` / ``bench-floor.log`` here.
    """
    from agent.config import DEFAULT_CONFIG
    from agent.models import resolve_model
    from tools.pulse import missing

    def note(s: str) -> None:
        typer.echo(s, err=True)

    try:
        if eot:
            from tools.bench.eot import format_eot, run_eot

            report = run_eot(cfg, commands, note)
            typer.echo(json.dumps(report) if json_out else format_eot(report))
            return
        if (why := missing()) is not None:
            typer.echo(f"error: the live benchmarks need a PulseAudio server: {why}", err=True)
            raise typer.Exit(2)
        voice = resolve_model(cfg.tts.voice, "voice")
        log = Path.cwd() / ("bench-conversation.log" if conversation else "bench-floor.log")
        if conversation:
            from tools.bench.live import conversation_turns, format_conversation, run_conversation
            from tools.bench.speakers import build_speakers, default_folder

            build_speakers(default_folder(), voice)
            said = conversation_turns(turns_played, commands)
            report = run_conversation(config or DEFAULT_CONFIG, said, log, note)
            typer.echo(json.dumps(report) if json_out else format_conversation(report))
            return
        from tools.bench.floor_bench import format_floor, run_floor
        from tools.bench.floor_set import build_floor_set, build_story
        from tools.bench.floor_set import default_folder as floor_folder

        clips = build_floor_set(floor_folder(), voice, TEST_DATA / "audio" / "jfk.flac")
        story = build_story(floor_folder(), voice)  # a long reply to talk over
        base = config or DEFAULT_CONFIG
        if floor_model:
            report = run_floor(base, clips, floor_folder(), story, log, note)
        else:
            from tools.bench.story_server import StoryServer, story_config

            with StoryServer() as server:
                told = story_config(base, server.url, Path.cwd() / "bench-floor.toml")
                note(f"the story: {server.url} (config {told})")
                report = run_floor(told, clips, floor_folder(), story, log, note)
            report["talker"] = "story server"
        typer.echo(json.dumps(report) if json_out else format_floor(report))
    except RuntimeError as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(1) from None


def _bench_peer(cfg: Any, folder: Path, limit: int, runs: int, ours: Optional[Path], json_out: bool) -> None:
    """``bench --peer``: pipecat on the same WAVs (:mod:`tools.bench.peer`), with ours beside it."""
    from agent.models import ModelNotFoundError
    from tools.bench.peer import PeerError, format_peer, load_ours, peer_report, run_peer

    try:
        mine = load_ours(ours) if ours is not None else None  # a bad file fails before the long run
        raw = run_peer(cfg, folder, limit, runs, note=lambda s: typer.echo(s, err=True))
    except (PeerError, ModelNotFoundError) as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2) from None
    report = peer_report(raw, mine)
    typer.echo(json.dumps(report) if json_out else format_peer(report))


def _bench_vision(cfg: Any, folder: Optional[Path], frames: int, runs: int, json_out: bool) -> None:
    """``bench --vision``: the question is ``what_see.wav`` in the commands folder, when there is one."""
    from tools.bench.vision_bench import VisionBenchError, format_vision, run_vision_bench

    question = folder / "what_see.wav" if folder is not None else None
    if question is not None and not question.is_file():
        question = None
    if question is None:
        typer.echo("note: no what_see.wav in the fixtures folder; timing descriptions only", err=True)
    try:
        report = run_vision_bench(cfg, question, frames=frames, runs=runs)
    except VisionBenchError as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2) from None
    typer.echo(json.dumps(report) if json_out else format_vision(report))


def _interrupt(signum: int, frame: object) -> None:
    """SIGTERM ends the soak like Ctrl-C, once: a second signal must not break the report's writing."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    raise KeyboardInterrupt


def _progress(row: dict[str, Any]) -> None:
    """One line per turn: kind, answered, latency, memory."""
    got = f"{row['latency_ms']:.0f} ms" if row["answered"] else "UNANSWERED"
    mem = (
        f"PSS {row['pss_mib']:.0f} MiB, {row['threads']} threads, {row['fds']} fds"
        if "pss_mib" in row
        else ""
    )
    typer.echo(f"turn {row['turn']} {row['kind']}: {got} {row.get('heard', '')} {mem}")


def soak(
    config: ConfigOpt = None,
    turns: Annotated[int, typer.Option(min=0, help="turns to run (0: until --hours)")] = 150,
    hours: Annotated[float, typer.Option(min=0, help="hours to run (0: until --turns)")] = 0.0,
    warmup: Annotated[
        int, typer.Option(min=0, help="turns before memory is compared (0: min(50, 40 percent of --turns))")
    ] = 0,
    out: Annotated[Path, typer.Option(help="folder for report.json, report.png and agent.log")] = Path(
        "soak-report"
    ),
    commands: Annotated[
        Optional[Path],
        typer.Option(help="folder of command WAVs with manifest.json (default: synthesized with piper)"),
    ] = None,
    camera: Annotated[
        Optional[Path],
        typer.Option(
            help="image folder or video file for the camera when the config has none (default: drawn)"
        ),
    ] = None,
    sample_s: Annotated[float, typer.Option(min=0.5, help="seconds between memory samples")] = 5.0,
    console: Annotated[bool, typer.Option(help="typed turns through the live console")] = True,
    json_out: JsonOpt = False,
    verbose: VerboseOpt = False,
) -> None:
    """Run the agent for N turns or H hours on virtual audio; report memory, threads, fds, latency.

    The agent is a child process on a private PulseAudio server (null sinks): spoken commands,
    barge-ins, noise, typed lines through the live console, timers, and a camera playing an
    image folder. Writes ``OUT/report.json`` (samples, per-turn rows, summary) and
    ``OUT/report.png`` (memory and latency over turns) and prints the summary.
    """
    from agent.config import DEFAULT_CONFIG
    from agent.models import resolve_model
    from tools.bench.soak import SoakOptions, run_soak, soak_config
    from tools.bench.soak_report import build_report, default_warmup, format_summary, write_report
    from tools.bench.soak_set import build_soak_set, camera_frames, default_folder
    from tools.pulse import missing

    setup_logging(verbose)
    if turns == 0 and hours == 0:
        typer.echo("error: give --turns or --hours", err=True)
        raise typer.Exit(2)
    if (why := missing()) is not None:
        typer.echo(f"error: the soak needs a PulseAudio server: {why}", err=True)
        raise typer.Exit(2)
    cfg = load_or_exit(config)
    if console:
        try:
            import starlette  # noqa: F401
            import uvicorn  # noqa: F401
        except ModuleNotFoundError as e:
            typer.echo(
                f"note: no typed turns: the console needs {e.name} (pip install 'bolt-agent[console]')"
            )
            console = False
    out.mkdir(parents=True, exist_ok=True)
    try:
        clips = build_soak_set(resolve_model(cfg.tts.voice, "voice"), commands=commands)
    except RuntimeError as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2) from None
    frames = camera or camera_frames(default_folder() / "camera")
    child_cfg = soak_config(config or DEFAULT_CONFIG, out, frames)
    opts = SoakOptions(
        turns=turns, hours=hours, sample_s=sample_s, console=console, progress=None if json_out else _progress
    )
    signal.signal(signal.SIGTERM, _interrupt)
    signal.signal(signal.SIGINT, _interrupt)
    started = time.time()
    try:
        run = run_soak(child_cfg, clips, out, opts)
    except RuntimeError as e:
        typer.echo(f"error: {e} (its log: {out / 'agent.log'})", err=True)
        raise typer.Exit(1) from None
    meta = {
        "config": str(child_cfg),
        "turns_asked": turns,
        "hours_asked": hours,
        "started_unix": round(started),
        "wall_s": round(time.time() - started, 1),
        "camera": str(frames),
        "commands": [c.text for c in clips.commands],
    }
    report = build_report(run, warmup or default_warmup(turns or len(run.rows)), meta)
    path, png = write_report(report, out)
    if json_out:
        typer.echo(json.dumps(report["summary"]))
    else:
        typer.echo(format_summary(report["summary"]))
        typer.echo(f"report: {path}" + (f", plot: {png}" if png else " (no plot: pip install matplotlib)"))
    if run.crashes or report["summary"]["unanswered"]:
        raise typer.Exit(1)


def _fail(msg: str, code: int = 1) -> NoReturn:
    typer.echo(f"error: {msg}", err=True)
    raise typer.Exit(code)


def _config(path: Path | None) -> Config:
    """The config at ``path`` (or the embedded default); a bad one exits 2."""
    try:
        return load_config(path)
    except ConfigError as e:
        _fail(str(e), 2)


def _robot(cfg: Config) -> Robot:
    """Build the configured robot; notes go to stderr, a driver that cannot be built exits 1."""
    from hardware.driver import DriverError
    from hardware.factory import build_robot

    try:
        robot, messages = build_robot(cfg.robot)
    except DriverError as e:
        _fail(str(e))
    for m in messages:
        typer.echo(f"note: {m}", err=True)
    return robot


def motion_bench(
    config: Annotated[Path | None, typer.Option("--config", "-c", help="robot config TOML")] = None,
    trials: Annotated[int, typer.Option(help="head-yaw steps for the command-to-motion latency")] = 20,
    park: Annotated[
        bool, typer.Option(help="also time SIGTERM-to-parked on a bolt-agent chat child (Reachy Mini)")
    ] = True,
    as_json: Annotated[bool, typer.Option("--json", help="print the figures as one JSON object")] = False,
) -> None:
    """Measure the body's motion loop rate, command-to-motion latency and SIGTERM-to-parked time."""
    from hardware.config import REACHY_MINI
    from tools.bench.motion import command_latency, loop_rate, sigterm_to_parked, summary

    cfg = _config(config)
    robot = _robot(cfg)
    reachy = cfg.robot.driver == REACHY_MINI
    figures: dict = {"driver": cfg.robot.driver}
    try:
        state, message = robot.status()
        if state != "online":
            _fail(f"the robot is {state}: {message}")
        robot.wait_idle(10)  # a Reachy Mini's wake-up move
        dances = robot.libraries.get("dances", {})
        gesture = dances.get("groovy_sway_and_roll") if reachy and dances else "nod"
        figures["loop"] = loop_rate(robot, gesture)
        figures["latency"] = command_latency(robot, trials=trials)
    finally:
        robot.close()
    if park and reachy and config is not None:
        from hardware.reachy_mini.daemon import motor_mode

        def motors_off() -> bool:
            try:
                return motor_mode(cfg.robot.reachy_mini, 0.5) == "disabled"
            except (OSError, ValueError):
                return False

        figures["park"] = sigterm_to_parked(config, motors_off)
    typer.echo(json.dumps(figures) if as_json else summary(figures))


def look_bench(
    config: Annotated[Optional[Path], typer.Option("--config", "-c", help="robot config TOML")] = None,
    trials: Annotated[int, typer.Option(help="voice direction changes to time")] = 10,
    video: Annotated[
        Optional[Path], typer.Option("--video", help="also measure eye contact on this video as the camera")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print the figures as one JSON object")] = False,
) -> None:
    """Time the turn toward a voice (a scripted direction of arrival) and the eye-contact tracking rate."""
    from tools.bench.look_bench import tracking_rate, turn_onsets

    cfg = _config(config)
    robot = _robot(cfg)
    figures: dict[str, Any] = {"driver": cfg.robot.driver}
    try:
        state, message = robot.status()
        if state != "online":
            _fail(f"the robot is {state}: {message}")
        robot.wait_idle(10)  # a Reachy Mini's wake-up move
        figures["turn"] = turn_onsets(robot, trials)
        if video is not None:
            figures["eye_contact"] = tracking_rate(robot, video, hfov_deg=cfg.camera.hfov_deg)
    finally:
        robot.close()
    if as_json:
        typer.echo(json.dumps(figures))
        return
    t = figures["turn"]
    typer.echo(
        f"turn toward a voice ({figures['driver']}): onset p50 {t['onset_p50_ms']} ms, "
        f"p95 {t['onset_p95_ms']} ms, max {t['onset_max_ms']} ms ({t['trials']} trials, {t['missed']} missed)"
    )
    if "eye_contact" in figures:
        e = figures["eye_contact"]
        typer.echo(
            f"eye contact: {e['tracking_hz']} corrections/s over {e['seconds']:g} s "
            f"({e['frames_with_a_face']} of {e['frames_looked']} frames with a face)"
        )


app.command("bench")(bench)
app.command("soak")(soak)
app.command("motion-bench")(motion_bench)
app.command("look-bench")(look_bench)


def command() -> Any:
    """The Click command of :data:`app`, every help text plain (:func:`agent.cli.helptext.tidy`)."""
    from agent.cli.helptext import tidy

    return tidy(typer.main.get_command(app))


def main() -> None:
    """``python -m tools.bench``: numpy's BLAS on one thread first, as the agent runs it."""
    from agent.blas import limit_numpy_blas

    limit_numpy_blas()
    command()(prog_name="bolt-agent")
