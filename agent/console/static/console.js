// bolt-agent console: one EventSource (/api/events) in, JSON POSTs (/api/...) out. No build step.
// Every message is the agent's own JSON event ({"event": name, "turn_id": ..., ...}), plus the
// console's snapshots: info (models, memory plan, joints, animations), body, camera, console (dropped).
// Joint values are in each joint's unit: degrees, or millimetres for a Reachy Mini's head x/y/z.
"use strict";

const $ = (id) => document.getElementById(id);
const el = (tag, cls, text) => {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
};
const fmt = (v) => (typeof v === "string" ? v : JSON.stringify(v));

const state = { joints: {}, history: [], estopped: false, muted: false, driver: "" };
const UNIT = { deg: "°", mm: " mm" };
// Why a pause was judged as it was (the same words as `--verbose`, agent/cli/printer.py).
const PAUSE_RULES = {
  text: "the words end a sentence",
  smart_turn: "Smart Turn hears an ending, the words allow it",
  stop: "a stop phrase",
  continuation: "ends in a continuation",
  no_direction: "an amount of turn, no direction yet",
  hesitation: "only a hesitation so far",
  unsure: "an unsure guess at a hum or a noise",
  address: "only the robot's name so far",
  unfinished: "neither signal says finished",
  empty: "nothing heard",
  error: "the check failed: waiting for silence",
};

// --- conversation ----------------------------------------------------------------------------
function append(node) {
  const log = $("log");
  const atEnd = log.scrollHeight - log.scrollTop - log.clientHeight < 40;
  log.appendChild(node);
  if (atEnd) log.scrollTop = log.scrollHeight;
  return node;
}

function robotBubble(turn) {
  let b = document.querySelector(`.robot[data-turn="${turn}"]`);
  if (!b) {
    b = el("div", "msg robot");
    b.dataset.turn = turn;
    b.appendChild(el("span", "who", `robot · turn ${turn}`));
    append(b);
  }
  return b;
}

function toolEntry(ev) {
  let t = ev.call_id ? document.querySelector(`.tool[data-call="${CSS.escape(ev.call_id)}"]`) : null;
  if (!t) {
    t = el("div", "msg tool");
    t.dataset.call = ev.call_id || "";
    t.dataset.tool = ev.name;
    t.appendChild(el("span", "who", `tool · turn ${ev.turn_id}`));
    t.appendChild(el("span", "call", `${ev.name}(${fmt(ev.arguments || {})})`));
    append(t);
  }
  return t;
}

function addResult(ev, label) {
  const t = toolEntry(ev);
  const dur = ev.duration_ms == null ? "" : ` · ${Math.round(ev.duration_ms)} ms`;
  const r = el("div", "res" + (ev.ok ? "" : " failed"), `${label}${ev.ok ? "" : " FAILED"}: ${fmt(ev.result)}${dur}`);
  t.appendChild(r);
}

const handlers = {
  info(ev) {
    if (ev.loading) { setConn("agent loading…", "off"); return; }
    renderInfo(ev);
  },
  body: renderBody,
  camera: renderCamera,
  console(ev) { $("dropped").textContent = `dropped ${ev.dropped}`; $("dropped").className = "pill bad"; },
  ready(ev) { append(el("div", "note", `ready (models loaded and warmed in ${(ev.load_ms / 1000).toFixed(1)} s)`)); },
  transcript(ev) {
    $("partial").textContent = "";
    const m = el("div", "msg you");
    m.dataset.turn = ev.turn_id;
    m.appendChild(el("span", "who", `you · turn ${ev.turn_id}`));
    m.appendChild(el("span", "text", ev.text));
    append(m);
  },
  turn_dropped(ev) {  // the user went on: before the silence confirmed the turn, or after its answer
    const m = document.querySelector(`.msg.you[data-turn="${ev.turn_id}"]`);
    if (m) m.classList.add("dropped");
    append(el("div", "note", ev.continued
      ? `turn ${ev.turn_id}: you went on with the same sentence; it is answered whole next`
      : `turn ${ev.turn_id}: you went on, its reply was dropped`));
  },
  end_of_turn_check(ev) {  // a pause of the user's speech: what is heard so far, the verdict and why
    const signals = [];
    if (ev.text_score <= 0) signals.push(`words ${ev.text_score.toFixed(2)}`);
    if (ev.smart_turn >= 0) signals.push(`Smart Turn ${ev.smart_turn.toFixed(2)}`);
    if (ev.unclear) signals.push(`unclear words, logprob ${ev.asr_logprob.toFixed(2)}`);
    const why = PAUSE_RULES[ev.rule] || ev.rule;
    const heard = ev.confirm_ms > 0 ? ` - heard after ${ev.confirm_ms} ms of silence` : "";
    $("partial").textContent = `pause ${ev.pause_id}: "${ev.text || ""}" → ` +
      `${ev.complete ? "turn over" : "wait for more"} (${why}${signals.length ? "; " + signals.join(", ") : ""})${heard}`;
  },
  tool_call(ev) { toolEntry(ev); },
  tool_result(ev) { addResult(ev, "result"); },
  background_done(ev) {
    const m = el("div", "msg tool");
    m.dataset.tool = ev.tool;
    m.appendChild(el("span", "who", `background · turn ${ev.turn_id}`));
    append(m);
    m.appendChild(el("span", "", `${ev.tool} ${ev.ok ? "finished" : "FAILED"}: ${fmt(ev.result)}` +
      (ev.duration_ms == null ? "" : ` · ${(ev.duration_ms / 1000).toFixed(1)} s`)));
  },
  speaking(ev) { robotBubble(ev.turn_id).appendChild(el("span", "said", ev.text + " ")); },
  spoken(ev) {
    if (!ev.completed) robotBubble(ev.turn_id).appendChild(el("span", "cut", ev.text + " "));
  },
  reply(ev) {
    const b = robotBubble(ev.turn_id);
    if (!b.querySelector(".said") && ev.text) b.appendChild(el("span", "said", ev.text));
    if (!ev.text && !b.querySelector(".said")) b.appendChild(el("span", "muted", "(nothing to say)"));
  },
  barge_in(ev) { append(el("div", "barge", `⟂ turn ${ev.turn_id} cut (${ev.reason}, speaker silent in ${ev.stop_ms} ms)`)); },
  history_cut(ev) {
    if (ev.dropped) robotBubble(ev.turn_id).appendChild(el("span", "cut", `[never said: ${ev.dropped}]`));
  },
  context_tidied(ev) {  // compactions only: the read-ahead after every turn would be noise
    if (ev.dropped) append(el("div", "note", `context: ${ev.dropped} old turns summarized between turns, ` +
      `${ev.evaluated} prompt tokens read ahead in ${(ev.took_ms / 1000).toFixed(1)} s`));
  },
  timing: renderTiming,
  error(ev) { append(el("div", "msg error", `problem: ${ev.message}`)); },
  notice(ev) { append(el("div", "note", ev.message)); },
  skipped(ev) { append(el("div", "note", `skipped: ${ev.reason}`)); },
  device(ev) { append(el("div", "note", `${ev.kind} device ${ev.device}: ${ev.state}${ev.message ? " – " + ev.message : ""}`)); },
  input(ev) { append(el("div", "note", `input: ${ev.source}`)); },
  robot_parked() { append(el("div", "note", "robot parked at neutral")); },
  scene_described(ev) {  // the vision-language model's words, as they enter the chat model's context
    const d = $("described");
    d.hidden = false;
    d.textContent = `sees (${ev.trigger}, ${(ev.took_ms / 1000).toFixed(1)} s): ${ev.text}`;
  },
};

function onMessage(ev) {
  const h = handlers[ev.event];
  if (h) return h(ev);
  if (/partial/.test(ev.event)) { $("partial").textContent = ev.text || ""; return; }
}

// --- state panels ----------------------------------------------------------------------------
function setConn(text, cls) { const c = $("conn"); c.textContent = text; c.className = "pill " + cls; }

function renderInfo(ev) {
  setConn("live", "ok");
  const box = $("joints");
  box.textContent = "";
  state.joints = {};
  for (const j of ev.joints) {
    const row = el("div", "joint");
    row.id = `joint-${j.name}`;
    row.dataset.joint = j.name;
    row.appendChild(el("span", "name", j.name));
    const track = el("div", "track");
    const span = j.max_deg - j.min_deg || 1;
    const neutral = el("div", "neutral");
    neutral.style.left = `${((j.neutral_deg - j.min_deg) / span) * 100}%`;
    const fill = el("div", "fill");
    track.append(fill, neutral);
    row.appendChild(track);
    row.appendChild(el("span", "deg", "–"));
    j.unit = j.unit || "deg";
    row.dataset.unit = j.unit;
    row.title = `${j.min_deg}..${j.max_deg} ${j.unit}`;
    box.appendChild(row);
    state.joints[j.name] = { j, row, fill };
  }
  const sel = $("anim-select");
  sel.textContent = "";
  const groups = [["animations", ev.animations], ...Object.entries(ev.libraries || {})];
  for (const [kind, names] of groups) {
    if (!names.length) continue;
    const group = el("optgroup");
    group.label = kind;
    for (const a of names) group.appendChild(el("option", "", a));
    sel.appendChild(group);
  }
  state.driver = ev.driver || "";
  const models = $("models");
  models.textContent = "";
  for (const [role, name] of Object.entries(ev.models)) {
    const tr = el("tr");
    tr.append(el("td", "", role), el("td", "", name));
    models.appendChild(tr);
  }
  $("memory").textContent = ev.memory.message;
  const lines = $("memory-lines");
  lines.textContent = "";
  for (const l of (ev.memory.plan && ev.memory.plan.lines) || []) {
    const tr = el("tr");
    tr.append(el("td", "", l.component), el("td", "", l.where), el("td", "num", `${(l.bytes / 1048576).toFixed(0)} MiB`));
    lines.appendChild(tr);
  }
  if (!ev.camera) $("scene").textContent = "no camera";
}

function renderBody(ev) {
  for (const [name, deg] of Object.entries(ev.positions)) {
    const s = state.joints[name];
    if (!s) continue;
    const { j, row, fill } = s;
    const span = j.max_deg - j.min_deg || 1;
    const a = ((Math.min(deg, j.neutral_deg) - j.min_deg) / span) * 100;
    const b = ((Math.max(deg, j.neutral_deg) - j.min_deg) / span) * 100;
    fill.style.left = `${a}%`;
    fill.style.width = `${Math.max(b - a, 0.5)}%`;
    row.dataset.deg = deg;
    row.querySelector(".deg").textContent = `${deg.toFixed(0)}${UNIT[j.unit] || ""}`;
  }
  renderDriver(ev.driver);
  $("body-state").textContent = [
    ev.posture ? `posture ${ev.posture}` : "",
    ev.moving ? "moving" : "still",
    ...((ev.driver && ev.driver.notes) || []),
  ].filter(Boolean).join(" · ");
  state.estopped = ev.estopped;
  const es = $("estop-state");
  es.textContent = ev.estopped ? "E-STOP LATCHED" : ev.torque ? "motors on" : "motors off";
  es.className = "pill " + (ev.estopped ? "bad" : "ok");
  state.muted = ev.muted;
  $("mic-state").textContent = !ev.can_mute ? "no mic" : ev.muted ? "mic MUTED" : "mic on";
  $("mic-state").className = "pill " + (ev.muted ? "bad" : "ok");
  $("btn-mute").textContent = ev.muted ? "Unmute mic" : "Mute mic";
  $("btn-mute").disabled = !ev.can_mute;
  $("playing").textContent = ev.playing ? `playing ${ev.playing}` : "no animation";
}

function renderDriver(d) {
  if (!d) return;
  const pill = $("driver-state");
  const name = state.driver || "robot";
  pill.textContent = `${name} ${d.state}` + (d.message ? `: ${d.message}` : "");
  pill.title = d.message || "";
  pill.className = "pill " + (d.state === "online" ? "ok" : d.state === "connecting" ? "off" : "bad");
}

function renderCamera(ev) {
  const img = $("frame");
  img.hidden = false;
  img.src = `/api/frame.jpg?t=${ev.t}`;
  $("scene").textContent = `${ev.summary} (${ev.people.length} people, ${ev.faces.length} faces)` +
    (ev.offline ? " – camera offline" : "");
}

const MARKS = [
  ["endpoint", "endpoint_ms"], ["ASR done", "asr_done_ms"], ["first token", "first_token_ms"],
  ["first sentence", "first_sentence_ms"], ["first audio", "first_audio_ms"], ["first played", "first_played_ms"],
];

function renderTiming(ev) {
  const wf = $("waterfall");
  wf.textContent = "";
  $("wf-turn").textContent = `turn ${ev.turn_id} · whole turn ${Math.round(ev.turn_ms)} ms` +
    (ev.endpoint_rule ? ` · ended by ${ev.endpoint_rule}` : "");
  const marks = MARKS.filter(([, k]) => ev[k] >= 0);
  const end = Math.max(1, ...marks.map(([, k]) => ev[k]));
  let prev = 0;
  for (const [label, k] of marks) {
    const row = el("div", "wf-row");
    row.dataset.mark = k;
    const track = el("div", "wf-track");
    const bar = el("div", "wf-bar");
    bar.style.left = `${(prev / end) * 100}%`;
    bar.style.width = `${Math.max(((ev[k] - prev) / end) * 100, 0.5)}%`;
    track.appendChild(bar);
    row.append(el("span", "", label), track, el("span", "ms", `${Math.round(ev[k])} ms`));
    wf.appendChild(row);
    prev = Math.max(prev, ev[k]);
  }
  const v2v = ev.first_played_ms >= 0 ? ev.first_played_ms : ev.first_audio_ms;
  if (v2v >= 0) {
    state.history.push(v2v);
    if (state.history.length > 40) state.history.shift();
    renderHistory();
  }
}

function renderHistory() {
  const svg = $("history");
  const h = state.history;
  const max = Math.max(...h, 1);
  const step = h.length > 1 ? 300 / (h.length - 1) : 0;
  const pts = h.map((v, i) => `${(i * step).toFixed(1)},${(78 - (v / max) * 74).toFixed(1)}`).join(" ");
  svg.innerHTML = `<polyline points="${pts}" fill="none" stroke="#6cc26c" stroke-width="2"/>` +
    h.map((v, i) => `<circle cx="${(i * step).toFixed(1)}" cy="${(78 - (v / max) * 74).toFixed(1)}" r="2.5" fill="#6cc26c"/>`).join("");
  $("history-label").textContent =
    `voice-to-voice, last ${h.length} turns: now ${Math.round(h[h.length - 1])} ms, max ${Math.round(max)} ms`;
}

// --- controls --------------------------------------------------------------------------------
async function post(path, body) {
  const msg = $("control-msg");
  try {
    const r = await fetch(path, {
      method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body || {}),
    });
    const data = await r.json().catch(() => ({}));
    msg.textContent = r.ok ? "" : `${path.slice(5)}: ${data.error || r.status}`;
    return r.ok;
  } catch (e) {
    msg.textContent = `${path.slice(5)}: ${e}`;
    return false;
  }
}

function wire() {
  $("say").addEventListener("submit", async (e) => {
    e.preventDefault();
    const input = $("say-text");
    const text = input.value.trim();
    if (text && (await post("/api/say", { text }))) input.value = "";
  });
  $("btn-estop").addEventListener("click", () => post("/api/estop"));
  $("btn-clear").addEventListener("click", () => post("/api/clear"));
  $("btn-mute").addEventListener("click", () => post("/api/mute", { muted: !state.muted }));
  $("anim-play").addEventListener("click", () => post("/api/animate", { name: $("anim-select").value }));

  const es = new EventSource("/api/events");
  es.onopen = () => { $("log").textContent = ""; state.history = []; setConn("live", "ok"); };
  es.onerror = () => setConn("disconnected – retrying", "off");
  es.onmessage = (m) => {
    let ev;
    try { ev = JSON.parse(m.data); } catch (e) { return; }
    onMessage(ev);
  };
}

document.addEventListener("DOMContentLoaded", wire);
