// ridgeline explorer: the page's state lives in the URL (#model=...&batch=...), every view is a
// call to the JSON API, and the plots are drawn with plotly's bundled plotly.min.js.
// No build step: plain ES2020, one file.
"use strict";

const DTYPES = ["bf16", "fp16", "fp32", "fp8", "int8", "int4", "fp4"];
const DEFAULTS = {
  model: "llama-3.1-8b", hw: "h100-sxm", batch: 1, context: 4096, prompt: 2048,
  wdt: "bf16", adt: "bf16", kvdt: "bf16", sched: "ibm-spyre", config: null, cname: null,
  mode: "calibrated",
};
const MODE_LABELS = { calibrated: "expected (calibrated)", ideal: "ideal roofline" };
const COLORS = { prefill: "#1f5fbf", decode: "#b3541e", roof: "#1d2433", kv: "#7a3fb0" };
const PLOT_CONFIG = { responsive: true, displaylogo: false, modeBarButtonsToRemove: ["lasso2d", "select2d"] };

const state = { ...DEFAULTS };
const $ = (id) => document.getElementById(id);
let seq = 0;
let timers = {};

// ---------- formatting (GB = 1e9 bytes, as everywhere in ridgeline) ----------
function fmtBytes(b) {
  if (b == null) return "—";
  const units = [["TB", 1e12], ["GB", 1e9], ["MB", 1e6], ["kB", 1e3]];
  for (const [u, s] of units) if (Math.abs(b) >= s) return `${(b / s).toPrecision(3)} ${u}`;
  return `${Math.round(b)} B`;
}
function fmtRate(v, unit) {
  if (v == null) return "—";
  const units = [["P", 1e15], ["T", 1e12], ["G", 1e9], ["M", 1e6], ["k", 1e3]];
  for (const [u, s] of units) if (v >= s) return `${(v / s).toPrecision(3)} ${u}${unit}`;
  return `${v.toPrecision(3)} ${unit}`;
}
function fmtSeconds(s) {
  if (s == null) return "—";
  if (s >= 1) return `${s.toPrecision(3)} s`;
  if (s >= 1e-3) return `${(s * 1e3).toPrecision(3)} ms`;
  return `${(s * 1e6).toPrecision(3)} µs`;
}
const fmtInt = (n) => (n == null ? "—" : Math.round(n).toLocaleString("en-US"));
const fmtNum = (x) => (x == null ? "—" : Number(x).toPrecision(3));

// ---------- URL state ----------
function b64encode(text) {
  const bytes = new TextEncoder().encode(text);
  let bin = "";
  bytes.forEach((b) => { bin += String.fromCharCode(b); });
  return btoa(bin).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}
function b64decode(s) {
  const bin = atob(s.replace(/-/g, "+").replace(/_/g, "/"));
  return new TextDecoder().decode(Uint8Array.from(bin, (c) => c.charCodeAt(0)));
}
function readHash() {
  const p = new URLSearchParams(location.hash.slice(1));
  for (const k of ["model", "hw", "wdt", "adt", "kvdt", "sched", "cname", "mode"]) if (p.has(k)) state[k] = p.get(k);
  for (const k of ["batch", "context", "prompt"]) {
    const v = parseInt(p.get(k), 10);
    if (Number.isFinite(v)) state[k] = v;
  }
  state.config = null;
  if (p.has("config")) {
    try { state.config = JSON.parse(b64decode(p.get("config"))); } catch (e) { showError(`config in the link is unreadable: ${e.message}`); }
  }
}
function writeHash() {
  const p = new URLSearchParams();
  for (const k of ["model", "hw", "batch", "context", "prompt", "wdt", "adt", "kvdt", "sched", "mode"]) p.set(k, state[k]);
  if (state.config) { p.set("config", b64encode(JSON.stringify(state.config))); p.set("cname", state.cname); }
  history.replaceState(null, "", `#${p.toString()}`);
}

// ---------- API ----------
function body() {
  const b = {
    accelerator: state.hw, batch: state.batch, context: state.context, prompt: state.prompt,
    weight_dtype: state.wdt, act_dtype: state.adt, kv_dtype: state.kvdt, mode: state.mode,
  };
  if (state.config) { b.config = state.config; b.config_name = state.cname || "uploaded"; } else b.model = state.model;
  return b;
}
async function api(path, payload) {
  const init = payload === undefined ? {} : {
    method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(payload),
  };
  const r = await fetch(path, init);
  const data = await r.json();
  if (!r.ok) {
    const d = (data.detail || [])[0] || {};
    const field = (d.loc || []).filter((x) => x !== "body").join(".");
    throw new Error(field ? `${field}: ${d.msg}` : d.msg || r.statusText);
  }
  return data;
}
function showError(msg) { const s = $("status"); s.className = "status"; s.textContent = msg; }
// A refused request leaves no result of an earlier state on the page: its plots are emptied and
// its numbers and tables cleared, so what is shown always belongs to the current controls.
function clearViews(plots, texts = [], tables = []) {
  for (const id of plots) if (window.Plotly) Plotly.purge(id);
  for (const id of texts) $(id).textContent = "";
  for (const id of tables) { const t = $(id); if (t && t.tBodies[0]) t.tBodies[0].innerHTML = ""; }
}
const MAIN_TEXTS = ["decode-bound", "decode-ai", "decode-time", "decode-tps", "prefill-bound", "prefill-ai",
  "prefill-time", "ridge", "ridge-level", "kv-summary", "scarce", "reads"];
function showOk(msg) { const s = $("status"); s.className = "status ok"; s.textContent = msg; }

// ---------- views ----------
function setBound(id, bound) {
  const el = $(id);
  el.textContent = `${bound}-bound`;
  el.className = `bound ${bound}`;
}

function drawRoofline(r) {
  const { prefill, decode } = r;
  const peak = decode.peak_flops_per_s, bw = decode.bandwidth_bytes_per_s;
  const ridge = decode.ridge_point_flops_per_byte;
  const ai = [];
  for (let e = -2; e <= 5.001; e += 0.05) ai.push(10 ** e);
  const attain = (x) => Math.min(peak, x * bw);
  const point = (s, name, symbol) => ({
    x: [s.arithmetic_intensity], y: [attain(s.arithmetic_intensity)], name, mode: "markers+text",
    type: "scatter", marker: { size: 13, symbol, color: COLORS[name] }, text: [name],
    textposition: name === "decode" ? "bottom right" : "top left",
    hovertemplate: `${name}: %{x:.3g} FLOP/B, %{y:.3s}FLOP/s<extra></extra>`,
  });
  const traces = [
    { x: ai, y: ai.map(attain), name: `${decode.accelerator} roof`, mode: "lines",
      line: { color: COLORS.roof, width: 2 }, hoverinfo: "skip" },
    point(prefill, "prefill", "square"),
    point(decode, "decode", "circle"),
  ];
  const layout = {
    margin: { l: 62, r: 12, t: 8, b: 44 }, showlegend: false,
    xaxis: { type: "log", title: { text: "arithmetic intensity (FLOP/byte)" }, range: [-2, 5], dtick: 1 },
    yaxis: { type: "log", title: { text: "attainable FLOP/s" }, dtick: 1, tickformat: "~s" },
    shapes: [{ type: "line", x0: ridge, x1: ridge, yref: "paper", y0: 0, y1: 1,
      line: { dash: "dot", color: "#888", width: 1 } }],
    annotations: [{ x: Math.log10(ridge), y: 0, yref: "paper", text: ` ridge ${fmtNum(ridge)} FLOP/B`,
      showarrow: false, xanchor: "left", yanchor: "bottom", font: { size: 11, color: "#555" } }],
  };
  Plotly.react("roofline-plot", traces, layout, PLOT_CONFIG);
  setBound("decode-bound", decode.bound);
  setBound("prefill-bound", prefill.bound);
  $("decode-ai").textContent = fmtNum(decode.arithmetic_intensity);
  $("prefill-ai").textContent = fmtNum(prefill.arithmetic_intensity);
  const ds = r.decode_speed, ps = r.prefill_speed;
  $("decode-time").textContent = fmtSeconds(ds.ideal.step_time_s);
  $("decode-tps").textContent = ds.fits ? fmtInt(ds.ideal.tokens_per_s) : "—";
  $("prefill-time").textContent = fmtSeconds(ps.ideal.step_time_s);
  $("ops-mode").textContent = r.pricing.label;
  $("decode-cal-time").textContent = ds.fits ? fmtSeconds(ds.calibrated.step_time_s) : "does not fit";
  $("decode-cal-tps").textContent = ds.fits ? fmtInt(ds.calibrated.tokens_per_s) : "—";
  $("decode-basis").textContent = ds.fits ? `(calibrated, ${ds.calibrated.family}${ds.calibrated.estimated_terms.length ? "; rests on estimates" : ""})` : `(${ds.unfit})`;
  $("prefill-cal-time").textContent = ps.fits ? fmtSeconds(ps.calibrated.step_time_s) : "does not fit";
  $("ridge").textContent = fmtNum(ridge);
  $("ridge-level").textContent = decode.level;
  drawOps(prefill, decode);
}

function drawOps(prefill, decode) {
  const share = (op, step) => `${(100 * op.time_s / step.step_time_s).toFixed(1)}%`;
  const cell = (op) => `<td class="num">${fmtSeconds(op.time_s)} <span class="bound ${op.bound}">${op.bound[0]}</span></td>`;
  $("ops-table").tBodies[0].innerHTML = decode.ops.map((d) => {
    const p = prefill.ops.find((o) => o.name === d.name) || d;
    return `<tr><th scope="row">${escapeHtml(d.name)}</th><td class="num">${d.count}</td>
      ${cell(d)}<td class="num">${share(d, decode)}</td>${cell(p)}<td class="num">${share(p, prefill)}</td></tr>`;
  }).join("");
}

function drawKv(k) {
  const ctx = k.curve.context, kvb = k.curve.kv_bytes;
  const cap = k.device_capacity_bytes, w = k.weights_bytes;
  const traces = [
    { x: ctx, y: kvb.map((v) => v / 1e9), name: `KV (batch ${k.batch})`, mode: "lines",
      line: { color: COLORS.kv, width: 2 } },
    { x: ctx, y: kvb.map((v) => (v + w) / 1e9), name: "weights + KV", mode: "lines",
      line: { color: COLORS.roof, width: 2, dash: "dash" } },
    { x: [ctx[0], ctx[ctx.length - 1]], y: [cap / 1e9, cap / 1e9], name: "device capacity",
      mode: "lines", line: { color: COLORS.decode, width: 2 } },
    { x: [ctx[0], ctx[ctx.length - 1]], y: [w / 1e9, w / 1e9], name: "weights", mode: "lines",
      line: { color: "#888", width: 1, dash: "dot" } },
  ];
  const marks = [];
  if (k.crossover_context_tokens != null) marks.push([k.crossover_context_tokens, w, "KV = weights", "#1d7a46"]);
  const maxCtx = k.capacity ? k.capacity.max_context : null;
  if (maxCtx != null) marks.push([maxCtx, w + k.capacity.kv_pool_bytes, "KV pool full", COLORS.decode]);
  marks.push([Math.max(k.context, 1), k.kv_bytes, "now", COLORS.prefill]);
  traces.push({
    x: marks.map((m) => m[0]), y: marks.map((m) => m[1] / 1e9), text: marks.map((m) => m[2]),
    name: "crossovers", mode: "markers+text", textposition: "top left", showlegend: false,
    marker: { size: 10, color: marks.map((m) => m[3]) },
    hovertemplate: "%{text}: %{x:,} tokens, %{y:.3g} GB<extra></extra>",
  });
  const layout = {
    margin: { l: 62, r: 12, t: 8, b: 44 }, legend: { orientation: "h", y: -0.25 },
    xaxis: { type: "log", title: { text: "context (tokens per sequence)" }, dtick: 1 },
    yaxis: { type: "log", title: { text: "GB (10⁹ bytes)" }, dtick: 1, tickformat: "~g" },
  };
  Plotly.react("kv-plot", traces, layout, PLOT_CONFIG);
  const parts = [
    `${fmtInt(k.kv_bytes_per_token)} B of ${k.kv_dtype} KV per token;`,
    `batch ${fmtInt(k.batch)} × ${fmtInt(k.context)} tokens = ${fmtBytes(k.kv_bytes)};`,
    `weights ${fmtBytes(w)}; device ${fmtBytes(cap)}.`,
    `KV passes the weights at ${k.crossover_context_tokens == null ? "no context" : `${fmtInt(k.crossover_context_tokens)} tokens`}.`,
  ];
  if (k.capacity) {
    const c = k.capacity, d = c.deployment, m = c.memory_per_chip;
    const most = (v) => (v == null ? "none" : fmtInt(v));
    parts.push(`On ${d.chips} × ${d.accelerator} (TP ${d.tensor_parallel} × PP ${d.pipeline_parallel}), `
      + `${m.memory_utilization} of each chip for weights, a ${fmtBytes(m.reserve_bytes)} reserve and KV: `
      + `batch ≤ ${most(c.max_batch)} at this context; context ≤ ${most(c.max_context)} at this batch`
      + `${c.context_capped ? " (the model's maximum)" : ""}.`);
  }
  else parts.push(k.capacity_error);
  $("kv-summary").textContent = parts.join(" ");
}

function drawQuestions(q) {
  const rows = q.levels.map((l) => `<tr><th scope="row">${l.name} <small>(${l.scope})</small></th>
    <td class="num">${fmtBytes(l.capacity_bytes)} × ${fmtInt(l.instances)}</td>
    <td class="num">${l.bandwidth_bytes_per_s ? fmtRate(l.bandwidth_bytes_per_s, "B/s") : "—"}</td>
    <td>${l.managed_by}</td><td class="num">${fmtNum(l.ridge_point_flops_per_byte)}</td></tr>`);
  $("questions-table").tBodies[0].innerHTML = rows.join("");
  $("scarce").innerHTML = `<strong>5. scarce on the roofline: ${escapeHtml(q.roofline.text)}</strong> — ${escapeHtml(q.reason)}; expected (calibrated) to bind: <strong>${escapeHtml(q.expected.text)}</strong>`;
  const r = q.decode_reads;
  const per = r.per_level.map((l) => `${l.level} ${fmtSeconds(l.time_s)}${l.fits ? "" : " (does not fit)"}`);
  $("reads").textContent = `One decode step reads weights ${fmtBytes(r.weight_bytes)}, KV ${fmtBytes(r.kv_bytes)}, activations ${fmtBytes(r.activation_bytes)}: ${per.join("; ")}.`;
}

const bindClass = (b) => (b === "compute" ? "compute" : b === "interconnect" ? "link" : "memory");
function drawCompare(c) {
  const step = (x) => (x ? `${fmtSeconds(x.step_time_s)} <span class="bound ${bindClass(x.binding)}">${escapeHtml(x.binding)}</span>` : "does not fit");
  const rows = c.rows.map((row) => {
    const q = row.questions, dep = row.deployment;
    const dev = q.levels.find((l) => l.name === q.device_level) || {};
    const chips = dep ? `${dep.chips}${dep.chips > 1 ? ` (TP ${dep.tensor_parallel} × PP ${dep.pipeline_parallel})` : ""}` : "—";
    return `<tr title="${escapeHtml(row.binds)}"><th scope="row">${escapeHtml(row.accelerator)} <small>(${escapeHtml(row.kind)})</small></th>
      <td class="num">${fmtBytes(q.device_capacity_bytes)}</td>
      <td class="num">${fmtRate(dev.bandwidth_bytes_per_s, "B/s")}</td>
      <td class="num">${fmtNum(q.ridge_point_flops_per_byte)}</td>
      <td class="num">${chips}</td>
      <td>${step(row.decode)}</td><td>${step(row.decode_calibrated)}</td>
      <td>${step(row.prefill)}</td><td>${step(row.prefill_calibrated)}</td></tr>`;
  });
  $("compare-table").tBodies[0].innerHTML = rows.join("");
  $("compare-binds").innerHTML = c.rows.map((r) => `<li>${escapeHtml(r.binds)}</li>`).join("");
  const fits = c.rows.filter((r) => r.decode);
  const colour = { compute: "#1d7a46", memory: "#b3541e", link: "#7a3fb0" };
  // bars: the quoted mode (its binding, as the table's list says); ticks: the other mode
  const ideal = c.mode === "ideal";
  const quoted = (r) => (ideal ? r.decode : r.decode_calibrated), other = (r) => (ideal ? r.decode_calibrated : r.decode);
  const otherLabel = ideal ? MODE_LABELS.calibrated : MODE_LABELS.ideal;
  const traces = [{
    type: "bar", orientation: "h", y: fits.map((r) => r.accelerator), x: fits.map((r) => quoted(r).tokens_per_s),
    marker: { color: fits.map((r) => colour[bindClass(quoted(r).binding)]) },
    text: fits.map((r) => `${r.deployment.chips} chip${r.deployment.chips > 1 ? "s" : ""}`), textposition: "auto",
    hovertemplate: `%{y}: ${c.label} %{x:,.0f} tokens/s<extra></extra>`, name: c.label,
  }, {
    type: "scatter", mode: "markers", y: fits.map((r) => r.accelerator), x: fits.map((r) => other(r).tokens_per_s),
    marker: { symbol: "line-ns-open", size: 18, color: "#222" }, name: otherLabel,
    hovertemplate: `%{y}: ${otherLabel} %{x:,.0f} tokens/s<extra></extra>`,
  }];
  const layout = {
    margin: { l: 110, r: 12, t: 8, b: 40 }, showlegend: false,
    xaxis: { type: "log", title: { text: `decode tokens/s on the smallest deployment that fits: bars ${c.label}, ticks ${otherLabel} (colour: what binds)` }, dtick: 1, tickformat: "~s" },
    yaxis: { autorange: "reversed" },
  };
  Plotly.react("compare-plot", traces, layout, PLOT_CONFIG);
}

function showModel(m) {
  const moe = m.moe ? `, MoE ${m.moe.experts} experts top-${m.moe.top_k}` : "";
  $("model-info").innerHTML = `<strong id="model-name">${escapeHtml(m.name)}</strong>:
    <span id="model-params">${fmtInt(m.params)}</span> parameters
    (${fmtInt(m.active_params)} active), ${m.layers} layers, ${m.attention.toUpperCase()}${moe},
    ${fmtInt(m.kv_bytes_per_token)} B/token of bf16 KV`;
}
function escapeHtml(s) {
  return String(s).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
}

// ---------- updates ----------
async function refresh() {
  const mine = ++seq;
  const b = body();
  try {
    const kb = { ...b, context: Math.max(b.context, 1) }; // KV sizing needs at least one token
    const [r, k, q] = await Promise.all([api("/api/roofline", b), api("/api/kv", kb), api("/api/questions", b)]);
    if (mine !== seq) return; // a newer state is on its way
    drawRoofline(r); drawKv(k); drawQuestions(q);
    showOk(`${r.decode.model} on ${r.decode.accelerator}: batch ${fmtInt(state.batch)}, context ${fmtInt(state.context)}, prompt ${fmtInt(state.prompt)}`);
  } catch (e) {
    if (mine !== seq) return;
    showError(e.message);
    clearViews(["roofline-plot", "kv-plot"], MAIN_TEXTS, ["ops-table", "questions-table"]);
  }
}
let compareSeq = 0, scheduleSeq = 0;
async function refreshCompare() {
  const mine = ++compareSeq;
  try {
    const c = await api("/api/compare", body());
    if (mine === compareSeq) drawCompare(c);
  } catch (e) {
    if (mine !== compareSeq) return;
    showError(e.message);
    clearViews(["compare-plot"], ["compare-binds"], ["compare-table"]);
  }
}
async function refreshModel() {
  try {
    const m = state.config
      ? await api("/api/models/parse", { config: state.config, config_name: state.cname || "uploaded" })
      : await api(`/api/models/${encodeURIComponent(state.model)}`);
    showModel(m);
  } catch (e) { showError(e.message); }
}
function schedule(name, fn, ms) {
  clearTimeout(timers[name]);
  timers[name] = setTimeout(fn, ms);
}
function changed(modelChanged = false) {
  writeHash();
  schedule("views", refresh, 40);
  schedule("compare", refreshCompare, 200);
  schedule("schedule", refreshSchedule, 300);
  if (modelChanged) refreshModel();
}

// ---------- controls ----------
function syncControls() {
  $("model").value = state.config ? "__uploaded__" : state.model;
  $("accelerator").value = state.hw;
  $("sched-accelerator").value = state.sched;
  $("weight-dtype").value = state.wdt; $("act-dtype").value = state.adt; $("kv-dtype").value = state.kvdt;
  $("pricing-mode").value = state.mode;
  for (const k of ["batch", "context", "prompt"]) {
    $(k).value = state[k];
    $(`${k}-range`).value = Math.round(Math.log2(Math.max(state[k], 1)));
  }
}
function setUploadedOption(name) {
  let opt = $("model").querySelector('option[value="__uploaded__"]');
  if (!opt) { opt = document.createElement("option"); opt.value = "__uploaded__"; $("model").prepend(opt); }
  opt.textContent = `uploaded: ${name}`;
}
function bindSize(k) {
  $(`${k}-range`).addEventListener("input", (e) => {
    state[k] = 2 ** parseInt(e.target.value, 10);
    $(k).value = state[k];
    changed();
  });
  $(k).addEventListener("change", (e) => {
    const v = parseInt(e.target.value, 10);
    if (!Number.isFinite(v)) { showError(`${k}: enter a whole number`); return; }
    state[k] = v;
    $(`${k}-range`).value = Math.round(Math.log2(Math.max(v, 1)));
    changed();
  });
}
async function onUpload(e) {
  const file = e.target.files[0];
  if (!file) return;
  let cfg;
  try { cfg = JSON.parse(await file.text()); } catch (err) { showError(`${file.name}: not valid JSON (${err.message})`); return; }
  const stem = file.name.replace(/\.json$/i, "");
  const name = (cfg && typeof cfg._name_or_path === "string" && cfg._name_or_path.split("/").pop()) || (stem === "config" ? "uploaded" : stem);
  try {
    const m = await api("/api/models/parse", { config: cfg, config_name: name });
    state.config = cfg; state.cname = name;
    setUploadedOption(name); syncControls(); showModel(m); changed();
  } catch (err) { showError(`${file.name}: ${err.message}`); }
}
function bind() {
  $("model").addEventListener("change", (e) => {
    if (e.target.value === "__uploaded__") return;
    state.model = e.target.value; state.config = null; changed(true);
  });
  $("accelerator").addEventListener("change", (e) => { state.hw = e.target.value; changed(); });
  $("sched-accelerator").addEventListener("change", (e) => { state.sched = e.target.value; changed(); });
  $("simulate-form").addEventListener("submit", runSimulation);
  $("plan-form").addEventListener("submit", runPlan);
  $("kvm-form").addEventListener("submit", runKvManage);
  $("weight-dtype").addEventListener("change", (e) => { state.wdt = e.target.value; changed(); });
  $("act-dtype").addEventListener("change", (e) => { state.adt = e.target.value; changed(); });
  $("kv-dtype").addEventListener("change", (e) => { state.kvdt = e.target.value; changed(); });
  $("pricing-mode").addEventListener("change", (e) => { state.mode = e.target.value; changed(); });
  ["batch", "context", "prompt"].forEach(bindSize);
  $("config-file").addEventListener("change", onUpload);
  $("copy-link").addEventListener("click", async () => {
    try { await navigator.clipboard.writeText(location.href); showOk("Link copied."); } catch (e) { showOk(`Link: ${location.href}`); }
  });
  window.addEventListener("hashchange", () => { readHash(); start(); });
}
function fill(select, values, labels) {
  select.innerHTML = values.map((v, i) => `<option value="${escapeHtml(v)}">${escapeHtml(labels ? labels[i] : v)}</option>`).join("");
}

// ---------- tiling and the compiled schedule ----------
function drawSchedule(s) {
  const gaps = Object.entries(s.gap).filter(([k, v]) => !k.startsWith("total") && v > 0)
    .map(([k, v]) => `${k.replace(/_s$/, "").replace(/_/g, " ")} ${fmtSeconds(v)}`).join(", ");
  $("sched-summary").textContent = `${s.pricing.label}: ${s.phase} step of ${s.model} on ${s.accelerator} (${s.cores} cores, bucket batch ${fmtInt(s.bucket.batch)} × ${fmtInt(s.bucket.context)} tokens): `
    + `compiled ${fmtSeconds(s.time_s)} vs roofline ${fmtSeconds(s.roofline_time_s)}${gaps ? ` (gap: ${gaps})` : ""}; `
    + `bandwidth ${(100 * s.bandwidth_utilisation).toFixed(1)}%, compute ${(100 * s.compute_utilisation).toFixed(2)}%; `
    + `peak scratchpad ${fmtBytes(s.peak_occupancy_bytes)} of ${fmtBytes(s.scratchpad_bytes)}; padding ${(100 * s.padding_fraction).toFixed(1)}%.`;
  $("sched-table").tBodies[0].innerHTML = s.ops.map((o) => `<tr><th scope="row">${escapeHtml(o.name)}</th>
    <td class="num">${o.count}</td><td>${escapeHtml(o.tile || o.kind)}</td>
    <td class="num">${fmtBytes(o.dram_load_bytes)}</td><td class="num">${fmtSeconds(o.time_s)}</td>
    <td class="num">${fmtSeconds(o.roofline_s)}</td><td>${escapeHtml(o.limiter)}</td></tr>`).join("");
}
function drawFlash(f) {
  const byMem = {};
  for (const r of f.rows) (byMem[r.memory] = byMem[r.memory] || []).push(r);
  const traces = [];
  const first = Object.values(byMem)[0] || [];
  traces.push({ x: first.map((r) => r.n), y: first.map((r) => r.prefill_standard_bytes_per_layer / 1e9),
    name: "standard attention", mode: "lines", line: { color: "#888", dash: "dot" } });
  for (const [mem, rows] of Object.entries(byMem)) {
    traces.push({ x: rows.map((r) => r.n), y: rows.map((r) => r.prefill_flash_bytes_per_layer / 1e9),
      name: `flash, ${mem}`, mode: "lines+markers" });
  }
  Plotly.react("flash-plot", traces, {
    margin: { l: 62, r: 12, t: 8, b: 40 }, legend: { orientation: "h", y: -0.35 },
    xaxis: { type: "log", title: { text: "sequence length N (prefill)" }, tickvals: first.map((r) => r.n), tickformat: ",d" },
    yaxis: { type: "log", title: { text: "GB per layer" }, dtick: 1, tickformat: "~g" },
  }, PLOT_CONFIG);
  const last = f.rows.filter((r) => r.n === f.rows[f.rows.length - 1].n);
  $("flash-summary").textContent = `${f.model}, ${f.heads} heads of d=${f.head_dim}, N=${fmtInt(last[0].n)}: `
    + last.map((r) => `${r.memory} saves ${r.prefill.saving.toFixed(1)}× (K/V read ${r.prefill.kv_passes}×, Q/O ${r.prefill.q_passes}×)`).join("; ") + ".";
}
async function refreshSchedule() {
  const b = body();
  const req = { accelerator: state.sched, phase: "decode", batch: state.batch, context: Math.max(state.context, 1),
    weight_dtype: state.wdt, act_dtype: state.adt, kv_dtype: state.kvdt, mode: state.mode };
  const fl = { context: Math.max(state.context, 8192) };
  if (b.config) { req.config = fl.config = b.config; req.config_name = fl.config_name = b.config_name; } else req.model = fl.model = b.model;
  const mine = ++scheduleSeq; // a slow compile must not overwrite a newer one
  $("sched-summary").textContent = "Compiling…";
  const [s, f] = await Promise.all([
    api("/api/schedule", req).catch((e) => e), api("/api/flash", fl).catch((e) => e),
  ]);
  if (mine !== scheduleSeq) return;
  if (s instanceof Error) {
    $("sched-summary").textContent = `No schedule: ${s.message}`;
    $("sched-table").tBodies[0].innerHTML = "";
  } else drawSchedule(s);
  if (f instanceof Error) {
    clearViews(["flash-plot"]);
    $("flash-summary").textContent = f.message;
  } else drawFlash(f);
}

// ---------- simulate ----------
function simBody() {
  const b = body();
  const s = {
    accelerator: b.accelerator, weight_dtype: b.weight_dtype, act_dtype: b.act_dtype, kv_dtype: b.kv_dtype,
    mode: b.mode, num_requests: parseInt($("sim-requests").value, 10), rate_per_s: parseFloat($("sim-rate").value),
    prompt_len: parseInt($("sim-prompt").value, 10), output_len: parseInt($("sim-output").value, 10),
  };
  if (b.config) { s.config = b.config; s.config_name = b.config_name; } else s.model = b.model;
  return s;
}
function drawSimulation(r) {
  const ms = (x) => (x == null ? "—" : `${(x * 1e3).toPrecision(3)} ms`);
  $("sim-summary").textContent = `${r.label} (${r.pricing.label}): ${fmtInt(r.num_completed)} done, ${fmtInt(r.num_rejected)} rejected in ${fmtSeconds(r.makespan_s)} simulated; `
    + `${r.requests_per_s.toPrecision(3)} req/s, ${fmtInt(r.output_tokens_per_s)} output tokens/s; TTFT p50 ${ms(r.ttft_s.p50)}, p99 ${ms(r.ttft_s.p99)}; `
    + `TPOT p50 ${ms(r.tpot_s.p50)}; ${r.num_preemptions} preemptions; KV peak ${(100 * r.kv_peak_frac).toFixed(1)}% of ${fmtInt(r.kv_blocks)} blocks.`;
  const cdf = (c, name, color) => ({ x: c.x, y: c.p, name, mode: "lines", line: { color, width: 2, shape: "hv" } });
  Plotly.react("sim-latency-plot", [cdf(r.cdf.ttft_s, "time to first token", COLORS.prefill), cdf(r.cdf.e2e_s, "end to end", COLORS.decode)], {
    margin: { l: 56, r: 12, t: 8, b: 40 }, legend: { orientation: "h", y: -0.4 },
    xaxis: { type: "log", title: { text: "latency (s)" }, dtick: 1, tickformat: "~g" }, yaxis: { title: { text: "fraction of requests" }, range: [0, 1.02] },
  }, PLOT_CONFIG);
  Plotly.react("sim-kv-plot", [{ x: r.kv_timeline.time_s, y: r.kv_timeline.used_frac.map((v) => 100 * v), name: "KV used",
    mode: "lines", line: { color: COLORS.kv, width: 2 }, fill: "tozeroy" }], {
    margin: { l: 56, r: 12, t: 8, b: 40 }, showlegend: false,
    xaxis: { title: { text: "simulated time (s)" } }, yaxis: { title: { text: "KV pool used (%)" }, rangemode: "tozero" },
  }, PLOT_CONFIG);
}
async function runSimulation() {
  const button = $("sim-run"), bar = $("sim-progress");
  button.disabled = true; bar.value = 0;
  $("sim-summary").textContent = "Simulating…";
  try {
    let job = await api("/api/simulate", simBody());
    while (job.status === "queued" || job.status === "running") {
      bar.value = job.total ? job.done / job.total : 0;
      $("sim-summary").textContent = `Simulating… ${fmtInt(job.done)} of ${fmtInt(job.total)} requests done`;
      await new Promise((ok) => setTimeout(ok, 200));
      job = await api(`/api/simulate/${job.id}`);
    }
    bar.value = 1;
    if (job.status === "failed") throw new Error(job.error);
    drawSimulation(job.result);
  } catch (e) {
    clearViews(["sim-latency-plot", "sim-kv-plot"]);
    $("sim-summary").textContent = `Not simulated: ${e.message}`;
  } finally { button.disabled = false; }
}

// ---------- KV management on five architectures ----------
function drawKvManage(r) {
  $("kvm-summary").textContent = `${r.model}: ${r.workload} — ${r.label}`;
  $("kvm-arch-table").tBodies[0].innerHTML = r.rows.map((a) => `<tr><td>${escapeHtml(a.accelerator)}</td>`
    + `<td>${escapeHtml(a.deployment)}</td><td>${escapeHtml(a.orchestrator)}</td><td>${escapeHtml(a.allocator)}</td>`
    + `<td>${escapeHtml(a.granularity)} (${fmtBytes(a.granularity_bytes)})</td><td>${escapeHtml(a.path)}</td></tr>`).join("");
  const head = ["technique", ...r.rows.map((a) => a.accelerator)];
  $("kvm-tech-table").tHead.rows[0].innerHTML = head.map((h) => `<th scope="col">${escapeHtml(h)}</th>`).join("");
  const names = r.rows.length ? r.rows[0].techniques.map((t) => t.technique) : [];
  $("kvm-tech-table").tBodies[0].innerHTML = names.map((n, i) => `<tr><th scope="row">${escapeHtml(n.replaceAll("_", " "))}</th>`
    + r.rows.map((a) => { const t = a.techniques[i];
      return `<td><b>${escapeHtml(t.provider)}</b>: ${escapeHtml(t.becomes)}. ${escapeHtml(t.effect)}</td>`; }).join("")
    + "</tr>").join("");
}
async function runKvManage() {
  const button = $("kvm-run");
  button.disabled = true;
  $("kvm-summary").textContent = "Simulating the seven techniques on each architecture…";
  const b = body(), req = { num_requests: parseInt($("kvm-requests").value, 10), mode: b.mode };
  if (b.config) { req.config = b.config; req.config_name = b.config_name; } else req.model = b.model;
  try { drawKvManage(await api("/api/kv-manage", req)); }
  catch (e) { $("kvm-summary").textContent = `Not compared: ${e.message}`; }
  finally { button.disabled = false; }
}

// ---------- plan: the cheapest deployment within targets ----------
function planBody() {
  const b = body();
  const chosen = [...$("plan-accelerators").selectedOptions].map((o) => o.value);
  const req = {
    accelerators: chosen.length ? chosen : [b.accelerator],
    isl: parseInt($("plan-isl").value, 10), osl: parseInt($("plan-osl").value, 10),
    rate_rps: parseFloat($("plan-rate").value),
    ttft_s: parseFloat($("plan-ttft").value) / 1e3, tpot_s: parseFloat($("plan-tpot").value) / 1e3,
  };
  if (b.config) { req.config = b.config; req.config_name = b.config_name; } else req.model = b.model;
  return req;
}
function withInterval(text, iv, fmt) {
  if (!iv || iv.low == null) return text;
  return `${text} <small>[${fmt(iv.low)}–${fmt(iv.high)}]</small>`;
}
function planRow(c) {
  const iv = c.intervals || {};
  if (c.chips == null) {
    return `<tr><td>${escapeHtml(c.accelerator)}</td><td>—</td><td>${escapeHtml(c.parallel)}, ${escapeHtml(c.serving)}</td>`
      + "<td colspan=\"4\">misses the targets within the chips allowed</td></tr>";
  }
  const head = c.headroom == null ? "—" : `${(100 * c.headroom).toFixed(0)}%`;
  return `<tr><td>${escapeHtml(c.accelerator)}</td><td>${c.chips} (${c.copies} × ${c.chips_per_copy})</td>`
    + `<td>${escapeHtml(c.parallel)}, ${escapeHtml(c.serving)}; ${escapeHtml(c.weight_dtype)}, KV ${escapeHtml(c.kv_dtype)}</td>`
    + `<td>${withInterval(fmtInt(c.tokens_per_s_per_chip), iv.tokens_per_s_per_chip, fmtInt)}</td>`
    + `<td>${withInterval(fmtSeconds(c.met.ttft_p_s), iv.ttft_s, fmtSeconds)}</td>`
    + `<td>${withInterval(fmtSeconds(c.met.tpot_p_s), iv.tpot_s, fmtSeconds)}</td><td>${head}</td></tr>`;
}
function drawPlan(p) {
  $("plan-summary").textContent = `${p.model}: ${p.verdict} (${p.num_simulations} simulations, ${p.wall_s.toFixed(1)} s)`;
  $("plan-table").tBodies[0].innerHTML = p.accelerators.flatMap((a) => a.candidates.slice(0, 3).map(planRow)).join("");
  const f = p.front;
  Plotly.react("plan-plot", [{ x: f.map((q) => q.tokens_per_s_per_user), y: f.map((q) => q.tokens_per_s_per_chip),
    text: f.map((q) => q.layout), mode: "lines+markers", name: "Pareto front", line: { color: COLORS.decode, shape: "hv" } }], {
    margin: { l: 62, r: 12, t: 8, b: 40 }, showlegend: false,
    xaxis: { title: { text: "tokens/s per user (1 / TPOT p90)" } }, yaxis: { title: { text: "output tokens/s per chip" }, rangemode: "tozero" },
  }, PLOT_CONFIG);
  const notes = p.accelerators.filter((a) => a.interval_note).map((a) => `${a.accelerator}: no interval (${a.interval_note})`);
  notes.push(...p.reasons.map((r) => `${r.layout}: ${r.why}`));
  $("plan-notes").innerHTML = notes.map((n) => `<li>${escapeHtml(n)}</li>`).join("");
  $("plan-commands").textContent = p.commands.map((c) => `# ${c.engine} (${c.note})\n${c.lines.join("\n")}`).join("\n\n");
}
async function runPlan() {
  const button = $("plan-run");
  button.disabled = true;
  $("plan-summary").textContent = "Planning: bounding every layout, simulating the best…";
  try { drawPlan(await api("/api/plan", planBody())); }
  catch (e) {
    clearViews(["plan-plot"]);
    $("plan-table").tBodies[0].innerHTML = ""; $("plan-commands").textContent = ""; $("plan-notes").innerHTML = "";
    $("plan-summary").textContent = `Not planned: ${e.message}`;
  } finally { button.disabled = false; }
}

function start() {
  if (state.config) setUploadedOption(state.cname || "uploaded");
  syncControls();
  changed(true);
}

async function init() {
  readHash();
  try {
    const [models, accs] = await Promise.all([api("/api/models"), api("/api/accelerators")]);
    fill($("model"), models.models.map((m) => m.name));
    const accNames = accs.accelerators.map((a) => a.name), accLabels = accs.accelerators.map((a) => `${a.name} (${a.kind})`);
    fill($("accelerator"), accNames, accLabels);
    fill($("sched-accelerator"), accNames, accLabels);
    fill($("plan-accelerators"), accNames, accLabels);
    for (const s of document.querySelectorAll("select.dtype")) fill(s, DTYPES);
    bind();
    start();
  } catch (e) { showError(`cannot reach the API: ${e.message}`); }
}
document.addEventListener("DOMContentLoaded", init);
