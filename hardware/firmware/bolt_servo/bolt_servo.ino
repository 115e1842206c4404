// bolt_servo: reference firmware for the bolt_servo line protocol, version 1 (hardware/PROTOCOL.md).
// Board: any Arduino-compatible board with the Servo library (Uno, Nano, Mega, RP2040...).
// Frames: "<body>*<HH>\n", HH = XOR of the body bytes in upper-case hex. One reply per command.
// Units: servo values are tenths of a degree, 0..1800 (900 = centre), mapped to 500..2500 us.
// Safety: per-channel limits (L), speed limits (S), and a watchdog that parks every servo at its
// neutral (N) and detaches it when the host is silent for W ms. Not compiled in CI; the Python
// emulator tests/emu_bolt.py speaks exactly this protocol.
#include <Servo.h>

#define PROTOCOL_VERSION 1
#define NUM_CHANNELS 4
#define MAX_LINE 120
static const uint8_t SERVO_PINS[NUM_CHANNELS] = {3, 5, 6, 9};

Servo servos[NUM_CHANNELS];
float pos[NUM_CHANNELS];          // current (interpolated) command, tenths of a degree
int target[NUM_CHANNELS];
float rate[NUM_CHANNELS];         // tenths of a degree per ms for the current move
int lo[NUM_CHANNELS], hi[NUM_CHANNELS], neutral[NUM_CHANNELS], speedDps[NUM_CHANNELS];
bool attached = false, estopped = false, wdArmed = false, parking = false;
unsigned long watchdogMs = 1000, lastRx = 0, lastStep = 0;
char line[MAX_LINE + 1];
uint8_t lineLen = 0;
bool overflow = false;

static uint8_t xorOf(const char *s, size_t n) { uint8_t c = 0; for (size_t i = 0; i < n; i++) c ^= (uint8_t)s[i]; return c; }

static void sendFrame(const char *body) {
  char ck[4];
  snprintf(ck, sizeof ck, "%02X", xorOf(body, strlen(body)));
  Serial.print(body); Serial.print('*'); Serial.print(ck); Serial.print('\n');
}

static void reply(const char *seq, const char *status, const char *data) {
  char buf[MAX_LINE];
  if (data && *data) snprintf(buf, sizeof buf, "%s %s %s", status, seq, data);
  else snprintf(buf, sizeof buf, "%s %s", status, seq);
  sendFrame(buf);
}

static void attachAll(bool on) {
  for (int i = 0; i < NUM_CHANNELS; i++) {
    if (on && !servos[i].attached()) { servos[i].attach(SERVO_PINS[i], 500, 2500); servos[i].writeMicroseconds(500 + (int)pos[i] * 10 / 9); }
    if (!on && servos[i].attached()) servos[i].detach();
  }
  attached = on;
}

static int clampCh(int ch, long v) { return (int)(v < lo[ch] ? lo[ch] : v > hi[ch] ? hi[ch] : v); }

static void startMove(int ch, int v, long ms) {
  target[ch] = clampCh(ch, v);
  float dist = fabs(target[ch] - pos[ch]);
  float maxRate = speedDps[ch] * 10.0f / 1000.0f;  // tenths of a degree per ms
  float r = ms > 0 ? dist / ms : maxRate;
  rate[ch] = r > maxRate ? maxRate : (r <= 0 ? maxRate : r);
}

// Parse "id=value" (value may be "lo:hi" for L); returns false on a syntax error or bad channel.
static bool parsePair(char *tok, int *id, long *a, long *b) {
  char *eq = strchr(tok, '=');
  if (!eq) return false;
  *eq = 0;
  *id = atoi(tok);
  if (*id < 0 || *id >= NUM_CHANNELS) return false;
  char *colon = strchr(eq + 1, ':');
  *a = atol(eq + 1);
  if (b) { if (!colon) return false; *b = atol(colon + 1); }
  return true;
}

static void handle(char *body) {
  char *seq = strtok(body, " ");
  char *cmd = strtok(NULL, " ");
  if (!seq || !cmd) { reply("?", "ERR", "ARG missing command"); return; }
  lastRx = millis(); wdArmed = true; parking = false;
  char data[MAX_LINE] = "";
  char *tok;
  int id; long a, b;
  switch (cmd[0]) {
    case 'P': snprintf(data, sizeof data, "bolt_servo %d %d", PROTOCOL_VERSION, NUM_CHANNELS); break;
    case 'H': break;
    case 'W': tok = strtok(NULL, " "); if (!tok || atol(tok) < 100 || atol(tok) > 10000) { reply(seq, "ERR", "ARG W 100..10000"); return; }
              watchdogMs = atol(tok); break;
    case 'T': tok = strtok(NULL, " "); if (!tok) { reply(seq, "ERR", "ARG T 0|1"); return; }
              if (tok[0] == '1') { estopped = false; attachAll(true); } else attachAll(false); break;
    case 'E': estopped = true; attachAll(false); for (int i = 0; i < NUM_CHANNELS; i++) target[i] = (int)pos[i]; break;
    case 'Q': for (int i = 0; i < NUM_CHANNELS; i++) { char p[16]; snprintf(p, sizeof p, "%s%d=%d", i ? " " : "", i, (int)pos[i]); strncat(data, p, sizeof data - strlen(data) - 1); } break;
    case 'M': {
      if (estopped) { reply(seq, "ERR", "STOP emergency stop latched; send T 1"); return; }
      tok = strtok(NULL, " "); if (!tok) { reply(seq, "ERR", "ARG M <ms> id=v..."); return; }
      long ms = atol(tok);
      while ((tok = strtok(NULL, " "))) { if (!parsePair(tok, &id, &a, NULL)) { reply(seq, "ERR", "ARG bad id=value"); return; } startMove(id, (int)a, ms); }
      break; }
    case 'S': case 'N': case 'L':
      while ((tok = strtok(NULL, " "))) {
        if (!parsePair(tok, &id, &a, cmd[0] == 'L' ? &b : NULL)) { reply(seq, "ERR", "ARG bad id=value"); return; }
        if (cmd[0] == 'S') speedDps[id] = a < 1 ? 1 : a > 1000 ? 1000 : (int)a;
        else if (cmd[0] == 'N') neutral[id] = (int)(a < 0 ? 0 : a > 1800 ? 1800 : a);
        else { lo[id] = (int)(a < 0 ? 0 : a); hi[id] = (int)(b > 1800 ? 1800 : b); }
      }
      break;
    default: reply(seq, "ERR", "CMD unknown command"); return;
  }
  reply(seq, "OK", data);
}

void setup() {
  Serial.begin(115200);
  for (int i = 0; i < NUM_CHANNELS; i++) { pos[i] = target[i] = neutral[i] = 900; lo[i] = 0; hi[i] = 1800; speedDps[i] = 180; rate[i] = 0.18f; }
  Serial.println("# bolt_servo booting");
  char ready[48];
  snprintf(ready, sizeof ready, "READY bolt_servo %d %d", PROTOCOL_VERSION, NUM_CHANNELS);
  sendFrame(ready);
  lastStep = millis();
}

void loop() {
  while (Serial.available()) {
    char c = (char)Serial.read();
    if (c == '\r') continue;
    if (c != '\n') { if (lineLen < MAX_LINE) line[lineLen++] = c; else overflow = true; continue; }
    line[lineLen] = 0;
    char *star = strrchr(line, '*');
    bool ok = !overflow && star && strlen(star) == 3 && (uint8_t)strtol(star + 1, NULL, 16) == xorOf(line, star - line);
    if (ok) { *star = 0; handle(line); } else reply("?", "ERR", "CHK bad frame or checksum");
    lineLen = 0; overflow = false;
  }
  unsigned long now = millis();
  if (wdArmed && now - lastRx > watchdogMs) {   // host went quiet: park at neutral, then detach
    wdArmed = false; parking = true;
    for (int i = 0; i < NUM_CHANNELS; i++) startMove(i, neutral[i], 0);
    sendFrame("WDOG");
  }
  unsigned long dt = now - lastStep;
  if (dt >= 10) {                               // 100 Hz interpolation toward each target
    lastStep = now;
    bool moving = false;
    for (int i = 0; i < NUM_CHANNELS; i++) {
      float d = target[i] - pos[i], step = rate[i] * dt;
      if (fabs(d) <= step) pos[i] = target[i]; else { pos[i] += d > 0 ? step : -step; moving = true; }
      if (attached && servos[i].attached()) servos[i].writeMicroseconds(500 + (int)(pos[i] * 10 / 9));
    }
    if (parking && !moving) { parking = false; attachAll(false); }
  }
}
