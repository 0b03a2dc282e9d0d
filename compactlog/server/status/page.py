'''The status page at ``/``: one self-contained HTML document (inline CSS and a small vanilla
script, no build step, nothing fetched but the broker's own JSON) that loads
``v1/status.json`` (``status.data.status_data``) and redraws itself every few seconds.

It draws each partition's log the way Kafka's documentation draws a compacted log: segments
left to right, oldest first, each as wide as its bytes; the cleaned tail (below the cleaner
checkpoint) on the left, the dirty head on the right (the part the next clean would take, then
what it may not take yet: the active segment, an open transaction, min.compaction.lag.ms), and a
marker where the cleaner checkpoint stands. Beside it the dirty ratio against
``min.cleanable.dirty.ratio``; above, the cleaner threads and uncleanable partitions; below, the
last cleanings and the consumer groups with their lag. Every colour is paired with text (a
legend, each segment's label for screen readers and as a tooltip, a sentence per partition).

``?refresh=N`` sets the refresh interval in seconds (default 3); the JSON path is relative, so
the page works behind a path prefix.
'''

from __future__ import annotations

STATUS_JSON_PATH = "v1/status.json"
DEFAULT_REFRESH_S = 3

_PAGE = r"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>compactlog status</title>
<style>
:root {
  --bg: #fbfbfa; --fg: #1d2127; --muted: #5d6670; --line: #d9dcdf; --card: #ffffff;
  --cleaned: #2f7d95; --cleanable: #e07b1a; --dirty: #f1b56c; --active: #8c96a1; --log: #9aa6b2;
  --bad: #b3261e; --good: #2e7d32; --marker: #111;
}
@media (prefers-color-scheme: dark) {
  :root { --bg: #15181c; --fg: #e6e8ea; --muted: #9aa3ad; --line: #343a41; --card: #1d2127;
          --cleaned: #4aa3bd; --cleanable: #f08c2c; --dirty: #b9823f; --active: #6d7782; --log: #6f7a86;
          --marker: #f4f4f4; }
}
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", sans-serif;
       background: var(--bg); color: var(--fg); }
header { padding: 14px 24px 10px; border-bottom: 1px solid var(--line); background: var(--card); }
header h1 { margin: 0; font-size: 20px; }
header p { margin: 2px 0 0; color: var(--muted); }
#updated.error { color: var(--bad); font-weight: 600; }
main { padding: 8px 24px 40px; max-width: 1400px; }
h2 { font-size: 17px; margin: 22px 0 8px; }
h3 { font-size: 15px; margin: 0; }
.cards { display: flex; flex-wrap: wrap; gap: 10px; margin: 0; }
.card { background: var(--card); border: 1px solid var(--line); border-radius: 6px; padding: 8px 14px; min-width: 150px; }
.card dt { color: var(--muted); font-size: 12px; }
.card dd { margin: 0; font-size: 18px; font-weight: 600; }
table { border-collapse: collapse; width: 100%; background: var(--card); border: 1px solid var(--line); }
th, td { text-align: left; padding: 5px 10px; border-bottom: 1px solid var(--line); vertical-align: top; }
th { font-size: 12px; color: var(--muted); font-weight: 600; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
.empty { color: var(--muted); font-style: italic; }
.badge { display: inline-block; padding: 0 7px; border-radius: 9px; font-size: 12px; font-weight: 600; border: 1px solid currentColor; }
.badge.ok, .badge.idle, .badge.alive, .badge.Stable { color: var(--good); }
.badge.bad, .badge.dead, .badge.failed, dd.bad { color: var(--bad); }
.badge.cleaning, .badge.discarded, .badge.warn { color: var(--cleanable); }
.legend { display: flex; flex-wrap: wrap; gap: 16px; margin: 4px 0 10px; color: var(--muted); font-size: 13px; padding: 0; list-style: none; }
.legend li { display: flex; align-items: center; gap: 6px; }
.swatch { width: 22px; height: 12px; display: inline-block; border-radius: 2px; }
.toolbar { margin: 6px 0 10px; }
.toolbar input { font: inherit; padding: 3px 6px; width: 240px; }
.topic { background: var(--card); border: 1px solid var(--line); border-radius: 6px; padding: 10px 14px; margin: 10px 0; }
.topic .meta { color: var(--muted); font-weight: normal; font-size: 13px; }
.partition { display: grid; grid-template-columns: 170px 1fr 230px; gap: 6px 16px; padding: 10px 0 6px; border-top: 1px solid var(--line); margin-top: 8px; }
.partition:first-of-type { border-top: 0; }
.pname { font-weight: 600; word-break: break-all; }
.pname small { display: block; font-weight: normal; color: var(--muted); }
.drawing { position: relative; padding-top: 18px; }
ol.log { display: flex; list-style: none; margin: 0; padding: 0; height: 30px; gap: 2px; align-items: stretch; }
ol.log li.seg { flex: 1 1 0; min-width: 4px; border-radius: 2px; position: relative; }
.seg-cleaned { background: var(--cleaned); }
.seg-cleanable { background: var(--cleanable); }
.seg-dirty { background: repeating-linear-gradient(135deg, var(--dirty) 0 5px, var(--cleanable) 5px 7px); }
.seg-log { background: var(--log); }
.seg-remote { background: repeating-linear-gradient(90deg, var(--log) 0 3px, var(--card) 3px 5px); }
ol.log.remote { height: 14px; margin-bottom: 4px; }
.seg-active { background: repeating-linear-gradient(45deg, var(--active) 0 1.5px, var(--card) 1.5px 6px) !important;
              box-shadow: inset 0 0 0 2px var(--active); }
ol.log li.checkpoint { flex: 0 0 0; width: 0; position: relative; }
.checkpoint-line { position: absolute; top: -18px; bottom: -4px; width: 0; border-left: 3px solid var(--marker); z-index: 2; }
li.checkpoint .checkpoint-line { left: -2px; }
.checkpoint-flag { position: absolute; top: -19px; left: 3px; font-size: 11px; white-space: nowrap; color: var(--fg);
                   background: var(--card); padding: 0 3px; border: 1px solid var(--marker); border-radius: 3px; line-height: 14px; z-index: 3; }
.axis { display: flex; justify-content: space-between; color: var(--muted); font-size: 11px; font-variant-numeric: tabular-nums; }
.describe { color: var(--muted); font-size: 12.5px; margin: 2px 0 0; }
.ratio { position: relative; height: 14px; background: var(--line); border-radius: 7px; overflow: visible; margin-top: 24px; }
.ratio-fill { position: absolute; left: 0; top: 0; bottom: 0; background: var(--cleaned); border-radius: 7px; }
.ratio-fill.over { background: var(--cleanable); }
.ratio-threshold { position: absolute; top: -5px; bottom: -5px; border-left: 2px solid var(--marker); }
.ratio-text { font-size: 12.5px; margin-top: 4px; }
.ratio-text .why { color: var(--muted); display: block; }
.sr { position: absolute; width: 1px; height: 1px; overflow: hidden; clip: rect(0 0 0 0); white-space: nowrap; }
details > summary { cursor: pointer; margin: 8px 0; font-weight: 600; }
code { font-size: 12.5px; }
@media (max-width: 900px) { .partition { grid-template-columns: 1fr; } }
</style>
</head>
<body>
<header>
  <h1>compactlog broker <span id="broker-id"></span></h1>
  <p id="broker-line">Data from <a href="__JSON_PATH__"><code>__JSON_PATH__</code></a>.</p>
  <p id="updated" role="status" aria-live="polite">Loading…</p>
</header>
<main>
  <section aria-labelledby="h-cleaner">
    <h2 id="h-cleaner">Log cleaner</h2>
    <dl class="cards" id="cards"></dl>
    <h3 style="margin-top:14px">Cleaner threads</h3>
    <div id="threads"></div>
    <div id="uncleanable"></div>
  </section>
  <section aria-labelledby="h-logs">
    <h2 id="h-logs">Topics and partitions</h2>
    <ul class="legend" aria-label="Legend">
      <li><span class="swatch seg-cleaned"></span>cleaned tail (below the cleaner checkpoint)</li>
      <li><span class="swatch seg-cleanable"></span>dirty head, cleanable by the next clean</li>
      <li><span class="swatch seg-dirty"></span>dirty head, not cleanable yet</li>
      <li><span class="swatch seg-active"></span>active segment (never cleaned)</li>
      <li><span class="swatch seg-log"></span>segment of a topic that is not compacted</li>
      <li><span class="swatch seg-remote"></span>segment in the remote tier only (tiered topics)</li>
      <li><span class="swatch" style="border-left:3px solid var(--marker);width:6px"></span>cleaner checkpoint</li>
    </ul>
    <div class="toolbar"><label>Filter topics <input id="filter" type="search" placeholder="name contains…"></label></div>
    <div id="topics"></div>
  </section>
  <section aria-labelledby="h-cleanings">
    <h2 id="h-cleanings">Last cleanings</h2>
    <div id="cleanings"></div>
  </section>
  <section aria-labelledby="h-groups">
    <h2 id="h-groups">Consumer groups</h2>
    <div id="groups"></div>
  </section>
  <noscript><p>This page draws the broker's state with JavaScript; the data itself is at
    <a href="__JSON_PATH__">__JSON_PATH__</a>.</p></noscript>
</main>
<script>
"use strict";
const JSON_URL = "__JSON_PATH__";
const params = new URLSearchParams(location.search);
const REFRESH_MS = Math.max(500, 1000 * (parseFloat(params.get("refresh")) || __REFRESH_S__));
const MAX_BLOCKS = 240;            // more segments than this: runs of one section drawn as one block
const openDetails = new Map();     // <details> id -> open, kept across redraws
let last = null, updates = 0;

function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "class") el.className = v;
    else if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}
function bytes(n) {
  if (n === null || n === undefined) return "–";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0, x = n;
  while (x >= 1024 && i < units.length - 1) { x /= 1024; i++; }
  return (i === 0 ? String(x) : x.toFixed(x < 10 ? 2 : 1)) + " " + units[i];
}
function num(n) { return n === null || n === undefined ? "–" : Number(n).toLocaleString("en-US"); }
function ratio(r) { return r === null || r === undefined ? "–" : Number(r).toFixed(2); }
function pad(n) { return String(n).padStart(2, "0"); }
function clockTime(ms) { const d = new Date(ms); return pad(d.getHours()) + ":" + pad(d.getMinutes()) + ":" + pad(d.getSeconds()); }
function ago(ms, now) {
  if (ms === null || ms === undefined) return "never";
  const s = Math.max(0, Math.round((now - ms) / 1000));
  if (s < 60) return s + " s ago";
  if (s < 3600) return Math.floor(s / 60) + " min " + (s % 60) + " s ago";
  return Math.floor(s / 3600) + " h " + Math.floor((s % 3600) / 60) + " min ago";
}
function seconds(s) { return s < 1 ? (1000 * s).toFixed(0) + " ms" : s.toFixed(2) + " s"; }
function table(headers, rows, empty) {
  if (!rows.length) return h("p", {class: "empty"}, empty);
  return h("table", {},
    h("thead", {}, h("tr", {}, headers.map(([t, cls]) => h("th", {scope: "col", class: cls}, t)))),
    h("tbody", {}, rows));
}
function put(id, ...children) {
  document.getElementById(id).replaceChildren(...children.flat(Infinity).filter(c => c !== null && c !== undefined && c !== false));
}
function details(id, summary, body, openByDefault) {
  const open = openDetails.has(id) ? openDetails.get(id) : openByDefault;
  const d = h("details", {id: id, open: open}, h("summary", {}, summary), body);
  d.addEventListener("toggle", () => openDetails.set(id, d.open));
  return d;
}

const RESULT_TEXT = {ok: "cleaned", failed: "failed", discarded: "discarded (the log changed)"};
const ENGINE_TEXT = {local: "in-process", spark: "Spark"};
const SECTION_TEXT = {cleaned: "cleaned", cleanable: "dirty, cleanable", dirty: "dirty, not cleanable yet",
                      active: "active segment, dirty", log: "not compacted"};

function blocksOf(segments) {
  if (segments.length <= MAX_BLOCKS) return segments.map(s => Object.assign({count: 1}, s));
  const out = [];
  for (const s of segments) {
    const prev = out[out.length - 1];
    if (prev && prev.section === s.section && !s.active) {
      prev.size += s.size; prev.endOffset = s.endOffset; prev.count += 1;
    } else out.push(Object.assign({count: 1}, s));
  }
  return out;
}

function checkpointMarker(p, inside) {
  const off = p.firstDirtyOffset;
  const label = p.cleanerCheckpoint === null
    ? "cleaner point " + num(off) + " (log start: not cleaned yet)"
    : "cleaner checkpoint " + num(p.cleanerCheckpoint);
  const attrs = {class: "checkpoint" + (inside === null ? "" : " inside"), "data-offset": off,
                 "data-checkpoint": p.cleanerCheckpoint === null ? "none" : p.cleanerCheckpoint, title: label};
  const parts = [h("span", {class: "checkpoint-line", "aria-hidden": "true"}), h("span", {class: "checkpoint-flag"}, label)];
  if (inside === null) return h("li", attrs, parts);
  attrs.style = "position:absolute;top:0;bottom:0;left:" + (100 * inside).toFixed(2) + "%";
  return h("span", attrs, parts);
}

function logDrawing(p) {
  const name = p.topic + "-" + p.partition;
  const ol = h("ol", {class: "log", "aria-label": "Segments of " + name + ", oldest first"});
  const blocks = blocksOf(p.segments);
  const ckpt = p.compacted ? p.firstDirtyOffset : null;
  let placed = ckpt === null;
  for (const b of blocks) {
    const section = b.active ? "active" : b.section;
    const what = (b.count > 1 ? b.count + " segments, offsets " : "segment, offsets ") +
                 num(b.baseOffset) + "–" + num(b.endOffset) + ", " + bytes(b.size) + ": " + SECTION_TEXT[section];
    if (!placed && ckpt <= b.baseOffset) { ol.append(checkpointMarker(p, null)); placed = true; }
    const li = h("li", {class: "seg seg-" + b.section + (b.active ? " seg-active" : ""), title: what,
                        style: "flex-grow:" + Math.max(b.size, 1),
                        "data-base-offset": b.baseOffset, "data-end-offset": b.endOffset,
                        "data-size": b.size, "data-section": section, "data-cleaned": b.cleaned ? "true" : "false"},
                 h("span", {class: "sr"}, what));
    if (!placed && ckpt > b.baseOffset && ckpt < b.endOffset) {
      li.append(checkpointMarker(p, (ckpt - b.baseOffset) / Math.max(b.endOffset - b.baseOffset, 1)));
      placed = true;
    }
    ol.append(li);
  }
  if (!placed) ol.append(checkpointMarker(p, null));
  return h("div", {class: "drawing"}, ol,
           h("div", {class: "axis", "aria-hidden": "true"}, h("span", {}, num(p.logStartOffset)), h("span", {}, num(p.logEndOffset))),
           h("p", {class: "describe"}, describe(p)));
}

function summarise(segs) {
  if (!segs.length) return null;
  const size = segs.reduce((a, s) => a + s.size, 0);
  return segs.length + (segs.length === 1 ? " segment" : " segments") + ", offsets " +
         num(segs[0].baseOffset) + "–" + num(segs[segs.length - 1].endOffset) + ", " + bytes(size);
}
function describe(p) {
  const segs = p.segments;
  if (!p.compacted) return "Not compacted (cleanup.policy without compact): " + summarise(segs) + ".";
  const tail = summarise(segs.filter(s => s.cleaned));
  const cleanable = summarise(segs.filter(s => s.cleanable));
  const rest = summarise(segs.filter(s => !s.cleaned && !s.cleanable && !s.active));
  const active = segs.find(s => s.active);
  const parts = ["Cleaned tail: " + (tail || "none yet")];
  parts.push("dirty head: " + (cleanable ? "cleanable " + cleanable : "nothing cleanable") +
             (rest ? "; not cleanable yet " + rest : ""));
  if (active) parts.push("active segment from offset " + num(active.baseOffset) + ", " + bytes(active.size));
  parts.push(p.cleanerCheckpoint === null ? "no cleaner checkpoint yet" : "cleaner checkpoint at offset " + num(p.cleanerCheckpoint));
  return parts.join(" · ") + ".";
}

function ratioView(p) {
  if (!p.compacted) return h("div", {class: "ratio-text why"}, "No dirty ratio: not compacted.");
  const r = p.dirtyRatio || 0, t = p.minCleanableDirtyRatio;
  const name = p.topic + "-" + p.partition;
  const over = r > t;
  const state = p.cleaningState ? " · cleaning: " + p.cleaningState : "";
  return h("div", {},
    h("div", {class: "ratio", role: "meter", "aria-label": "Dirty ratio of " + name, "aria-valuemin": 0,
              "aria-valuemax": 1, "aria-valuenow": r.toFixed(4),
              "aria-valuetext": ratio(r) + ", threshold " + ratio(t) + (over ? ", above" : ", not above")},
      h("div", {class: "ratio-fill" + (over ? " over" : ""), style: "width:" + (100 * Math.min(r, 1)).toFixed(1) + "%"}),
      h("div", {class: "ratio-threshold", style: "left:" + (100 * t).toFixed(1) + "%", title: "min.cleanable.dirty.ratio " + t})),
    h("div", {class: "ratio-text"}, "dirty ratio ", h("strong", {}, ratio(r)), " vs ", ratio(t),
      " · ", h("span", {class: "badge " + (p.eligible ? "warn" : "ok")}, p.eligible ? "eligible" : "not eligible"), state,
      h("span", {class: "why"}, p.reason + (p.nextEligibleMs ? " (eligible from " + clockTime(p.nextEligibleMs) + ")" : ""))));
}

function partitionView(p) {
  const name = p.topic + "-" + p.partition;
  return h("div", {class: "partition", "data-partition": name, id: "partition-" + name},
    h("div", {class: "pname"}, name,
      h("small", {}, bytes(p.size) + " in " + p.segmentCount + (p.segmentCount === 1 ? " segment" : " segments")),
      h("small", {}, "offsets " + num(p.logStartOffset) + "–" + num(p.logEndOffset))),
    h("div", {}, p.remote ? tierView(p) : null, logDrawing(p)), ratioView(p));
}

// a tiered partition: its remote segments (in the bucket only) drawn before the local log, and a
// sentence naming both tiers
function tierView(p) {
  const r = p.remote, name = p.topic + "-" + p.partition;
  const ol = h("ol", {class: "log remote", "aria-label": "Remote-only segments of " + name + ", oldest first"});
  for (const s of p.remoteSegments || []) {
    const what = "remote segment, offsets " + num(s.baseOffset) + "–" + num(s.endOffset) + ", " + bytes(s.size) + ": in the bucket only";
    ol.append(h("li", {class: "seg seg-remote", title: what, style: "flex-grow:" + Math.max(s.size, 1),
                       "data-base-offset": s.baseOffset, "data-end-offset": s.endOffset, "data-size": s.size, "data-tier": "remote"},
                h("span", {class: "sr"}, what)));
  }
  const text = "Remote tier: " + r.remoteSegmentCount + (r.remoteSegmentCount === 1 ? " segment, " : " segments, ") +
    bytes(r.remoteSizeBytes) + (r.highestRemoteOffset >= 0 ? ", up to offset " + num(r.highestRemoteOffset) : "") +
    " · local log from offset " + num(r.localLogStartOffset) + " · copy lag " + r.copyLagSegments +
    (r.copyLagSegments === 1 ? " segment, " : " segments, ") + bytes(r.copyLagBytes);
  return h("div", {class: "tiers", "data-tiers": name}, (p.remoteSegments || []).length ? ol : null, h("p", {class: "describe"}, text));
}

function topicView(t) {
  const head = h("h3", {}, t.name, " ",
    h("span", {class: "meta"}, "cleanup.policy=" + t.cleanupPolicy + " · " + t.partitions.length +
      (t.partitions.length === 1 ? " partition" : " partitions") + " · " + bytes(t.size) +
      (t.compacted ? " · min.cleanable.dirty.ratio " + t.minCleanableDirtyRatio : "")));
  return h("section", {class: "topic", "data-topic": t.name, "aria-label": "Topic " + t.name}, head, t.partitions.map(partitionView));
}

function render(doc) {
  const now = doc.nowMs, c = doc.cleaner;
  document.getElementById("broker-id").textContent = doc.broker.nodeId;
  put("broker-line",
    "cluster " + doc.broker.clusterId + " · " + (doc.broker.advertised || "") + " · data dir ",
    h("code", {}, doc.broker.dataDir), " · ", h("a", {href: JSON_URL}, "JSON"));
  const dead = c.threads.filter(t => !t.alive).length;
  const lastOk = c.recentCleanings.find(r => r.result === "ok");
  const lastClean = lastOk ? lastOk.endedMs : null;
  const card = (label, value, cls) => h("div", {class: "card"}, h("dt", {}, label), h("dd", {class: cls}, value));
  put("cards",
    card("Cleaner", c.enabled ? "enabled" : "disabled"),
    card("Threads", c.threads.length - dead + " alive" + (dead ? ", " + dead + " dead" : ""), dead ? "bad" : ""),
    card("Cleaning now", c.inProgress.length ? c.inProgress.join(", ") : "nothing"),
    card("max-dirty-percent", c.maxDirtyPercent + " %"),
    card("Uncleanable partitions", String(c.uncleanable.length)),
    card("Last successful cleaning", ago(lastClean, now)));
  put("threads", table(
    [["Thread"], ["State"], ["Cleaning now"], ["Last looked for work"], ["Deaths", "num"], ["Last death"]],
    c.threads.map(t => h("tr", {"data-thread": t.name},
      h("td", {}, t.name), h("td", {}, h("span", {class: "badge " + t.state}, t.state)),
      h("td", {}, t.partitions.join(", ") || "–"), h("td", {}, t.lastLookMs ? ago(t.lastLookMs, now) : "–"),
      h("td", {class: "num"}, num(t.deaths)),
      h("td", {}, t.alive ? (t.lastError ? "restarted; last: " + t.lastError : "–")
                          : "dead " + ago(t.deadSinceMs, now) + (t.lastError ? " (" + t.lastError + ")" : "") +
                            (t.restartAtMs ? "; restarted " + (t.restartAtMs > now ? "in " + Math.ceil((t.restartAtMs - now) / 1000) + " s" : "soon") : "")))),
    c.enabled ? "No cleaner thread in this process." : "The cleaner is disabled (log.cleaner.enable=false or log.cleaner.threads=0)."));
  put("uncleanable", c.uncleanable.length ? h("div", {},
    h("h3", {style: "margin-top:14px"}, "Uncleanable partitions"),
    table([["Partition"], ["Why"], ["Retried"]], c.uncleanable.map(u => h("tr", {},
      h("td", {}, u.topic + "-" + u.partition), h("td", {}, u.reason),
      h("td", {}, u.retryAtMs > now ? "in " + Math.ceil((u.retryAtMs - now) / 1000) + " s" : "at the next round"))), "")) : "");

  const filter = document.getElementById("filter").value.trim().toLowerCase();
  const shown = doc.topics.filter(t => !filter || t.name.toLowerCase().includes(filter));
  const user = shown.filter(t => !t.internal), internal = shown.filter(t => t.internal);
  put("topics",
    user.length ? user.map(topicView) : h("p", {class: "empty"}, filter ? "No topic matches." : "No topics yet."),
    internal.length ? details("internal-topics", "Internal topics (" + internal.map(t => t.name).join(", ") + ")",
                              internal.map(topicView), false) : "");

  put("cleanings", table(
    [["When"], ["Partition"], ["Result"], ["Records removed", "num"], ["Bytes before → after"], ["Engine"], ["Duration", "num"], ["Thread"]],
    c.recentCleanings.map(r => h("tr", {"data-cleaning": r.topic + "-" + r.partition, "data-result": r.result},
      h("td", {}, clockTime(r.endedMs), h("br"), h("small", {}, ago(r.endedMs, now))),
      h("td", {}, r.topic + "-" + r.partition),
      h("td", {}, h("span", {class: "badge " + r.result}, RESULT_TEXT[r.result] || r.result),
        r.error ? h("div", {class: "why"}, h("small", {}, r.error)) : ""),
      h("td", {class: "num"}, r.recordsRemoved === null ? "–" : num(r.recordsRemoved) + " of " + num(r.recordsRead),
        Object.keys(r.removed).length ? h("div", {}, h("small", {}, Object.entries(r.removed).map(([k, v]) => k + " " + num(v)).join(", "))) : ""),
      h("td", {}, r.result === "ok" ? bytes(r.bytesBefore) + " → " + bytes(r.bytesAfter) : "–"),
      h("td", {}, ENGINE_TEXT[r.engine] || r.engine),
      h("td", {class: "num"}, r.durationSeconds === null ? "–" : seconds(r.durationSeconds)), h("td", {}, r.thread))),
    "No cleaning since the broker started."));

  const groups = doc.groups.groups;
  put("groups",
    doc.groups.loading ? h("p", {class: "empty"}, "The group coordinator is still loading __consumer_offsets.") : "",
    table([["Group"], ["State"], ["Members", "num"], ["Total lag", "num"], ["Partitions (committed / end, lag)"]],
      groups.map(g => h("tr", {"data-group": g.groupId},
        h("td", {}, g.groupId), h("td", {}, h("span", {class: "badge " + g.state}, g.state)),
        h("td", {class: "num"}, num(g.members)), h("td", {class: "num"}, num(g.lag)),
        h("td", {}, g.partitions.length ? g.partitions.map(x => h("div", {},
          x.topic + "-" + x.partition + ": " + num(x.committedOffset) + " / " + num(x.logEndOffset) + ", lag " + num(x.lag))) : "no committed offsets"))),
      "No consumer groups."));
}

async function refresh() {
  const status = document.getElementById("updated");
  try {
    const r = await fetch(JSON_URL, {cache: "no-store", headers: {"Accept": "application/json"}});
    if (r.status === 503) throw new Error("the broker is starting: it is loading its logs");
    if (!r.ok) throw new Error("HTTP " + r.status);
    last = await r.json();
    render(last);
    updates += 1;
    document.body.dataset.updates = String(updates);
    document.body.dataset.nowMs = String(last.nowMs);
    status.classList.remove("error");
    status.textContent = "Updated " + clockTime(last.nowMs) + "; refreshes every " + REFRESH_MS / 1000 + " s.";
  } catch (e) {
    status.classList.add("error");
    status.textContent = "Could not read " + JSON_URL + " (" + e.message + "); retrying every " + REFRESH_MS / 1000 + " s" +
                         (last ? "; showing the state of " + clockTime(last.nowMs) + "." : ".");
  } finally {
    setTimeout(refresh, REFRESH_MS);
  }
}
document.getElementById("filter").addEventListener("input", () => { if (last) render(last); });
refresh();
</script>
</body>
</html>
"""


def render_status_page(json_path: str = STATUS_JSON_PATH, refresh_s: int = DEFAULT_REFRESH_S) -> str:
    """The page, fetching ``json_path`` (relative to the page) every ``refresh_s`` seconds."""
    if any(ch in json_path for ch in "\"'<>\\"):
        raise ValueError(f"json_path {json_path!r}: quotes, angle brackets and backslashes are not allowed")
    return _PAGE.replace("__JSON_PATH__", json_path).replace("__REFRESH_S__", str(int(refresh_s)))
