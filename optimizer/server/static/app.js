// The gpuplan page: a form for the job, over the JSON API of `gpuplan serve` (no build step, no framework).
// POST /page/solve answers /v1/solve's JSON with the verdict and the job file; POST /v1/check a hand-picked
// layout; POST /v1/export a plan's launcher config; GET /v1/catalogs/NAME the offers and prices. The charts
// are drawn here as SVG elements; answer text goes in by textContent alone (never parsed as HTML).
"use strict";

const $ = (id) => document.getElementById(id);
const SVG = "http://www.w3.org/2000/svg";
const CHOSEN = "#2f8f46";
const POINT = "#3566b0";
// a request replaced by a later one is aborted and its answer dropped: the latest request wins
const state = { doc: null, bundle: null, shown: null, seq: 0, controller: null, timer: null, checkSeq: 0, checkController: null };
const WHATIF_DEBOUNCE_MS = 350;

function el(tag, text, cls) {
  const node = document.createElement(tag);
  if (text !== undefined && text !== null) node.textContent = text;
  if (cls) node.className = cls;
  return node;
}

function svg(tag, attrs, text) {
  const node = document.createElementNS(SVG, tag);
  for (const [key, value] of Object.entries(attrs || {})) node.setAttribute(key, String(value));
  if (text !== undefined) node.textContent = text;
  return node;
}

function usd(value) {
  return value === null || value === undefined ? "n/a" : "$" + value.toLocaleString("en-US", { minimumFractionDigits: 2, maximumFractionDigits: 2 });
}

function hours(value) {
  return value === null || value === undefined ? "n/a" : value.toLocaleString("en-US", { maximumFractionDigits: 1 }) + " h";
}

function gib(value) {
  return `${value.toFixed(1)} GiB`;
}

// A server bound beyond loopback takes a POST with its token alone: the address gpuplan serve prints carries
// it after '#token=' (never sent to the server in the URL); kept for this tab, then taken off the address bar.
const TOKEN = (() => {
  const match = /(?:^#|&)token=([^&]+)/.exec(location.hash);
  if (match) {
    sessionStorage.setItem("gpuplan-token", decodeURIComponent(match[1]));
    history.replaceState(null, "", location.pathname + location.search);
  }
  return sessionStorage.getItem("gpuplan-token");
})();

function postHeaders() {
  const headers = { "Content-Type": "application/json" };
  if (TOKEN) headers.Authorization = `Bearer ${TOKEN}`;
  return headers;
}

async function fetchJSON(url, options) {
  const response = await fetch(url, options);
  let data = null;
  try {
    data = await response.json();
  } catch (_) {
    data = { detail: `${response.status} ${response.statusText}` };
  }
  return { ok: response.ok, status: response.status, data };
}

// ------------------------------------------------------------------ the form

// the job's name as gpuplan names a question asked without a file (inputs/question.py): the model's name part
function jobName(model) {
  return model.split("/").pop().replace(/[^A-Za-z0-9._-]+/g, "-").replace(/^[-.]+|[-.]+$/g, "") || "job";
}

function count(id) {
  const value = $(id).value.trim();
  return value ? Number(value) : null;
}

// a number as typed, where it is one ("2", "1.5", "1e3"); else the text, for the API to refuse naming its field
function numberOr(text) {
  return /^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$/.test(text) ? Number(text) : text;
}

// the form as a job document; a field left at its default stays out, so the job file says what was asked
function jobDocument() {
  const model = $("model").value.trim();
  const job = { name: jobName(model), model, method: $("method").value };
  if ($("tokens").value.trim()) job.tokens = $("tokens").value.trim();
  if ($("method").value !== "full" && count("lora_rank") !== null) job.lora_rank = count("lora_rank");
  if ($("seq_len").value) job.seq_len = Number($("seq_len").value);
  if ($("global_batch").value.trim()) job.global_batch = numberOr($("global_batch").value.trim());
  if ($("precision").value) job.precision = $("precision").value;
  if ($("framework").value !== "auto") job.framework = $("framework").value;
  if ($("compile").checked) job.compile = true;
  Object.assign(job, builtFieldValues());
  const measured = measuredEntries();
  if (measured.length) job.measured = measured;
  const constraints = {};
  if ($("headroom").value.trim()) constraints.memory_headroom = $("headroom").value.trim();
  if ($("deadline_quantile").value) constraints.deadline_quantile = $("deadline_quantile").value;
  if ($("deadline").value.trim()) constraints.deadline = $("deadline").value.trim();
  if ($("budget").value.trim()) constraints.budget = $("budget").value.trim();
  if (count("max_gpus") !== null) constraints.max_gpus = count("max_gpus");
  if (count("max_nodes") !== null) constraints.max_nodes = count("max_nodes");
  if ($("spot").value) constraints.spot = $("spot").value;
  const gpu = {};
  if ($("min_memory").value.trim()) gpu.min_memory = $("min_memory").value.trim();
  const types = [...document.querySelectorAll("#gpu-types input:checked")].map((box) => box.value);
  if (types.length) gpu.types = types;
  const providers = [...document.querySelectorAll("#gpu-providers input:checked")].map((box) => box.value);
  if (providers.length) gpu.providers = providers;
  if (count("gpu_count") !== null) gpu.count = count("gpu_count");
  if (Object.keys(gpu).length) constraints.gpu = gpu;
  const doc = { catalog: $("catalog").value, objective: $("objective").value, job };
  if (Object.keys(constraints).length) doc.constraints = constraints;
  return doc;
}

function setBusy(busy) {
  $("plan").disabled = busy;
  $("answer").setAttribute("aria-busy", String(busy));
  document.body.dataset.solving = busy ? "true" : "";
}

// Drop the request in flight (its answer, should it still come, is not shown) and any solve waiting to start.
function supersede() {
  state.seq += 1;
  clearTimeout(state.timer);
  state.timer = null;
  if (state.controller) state.controller.abort();
  state.controller = null;
}

// A solve after `delay` ms of quiet: each call before then replaces the last (the what-if sliders, keyed).
function solveSoon(delay) {
  supersede();
  setBusy(true);
  state.timer = setTimeout(solve, delay);
}

async function solve() {
  supersede();
  const seq = state.seq;
  const controller = new AbortController();
  state.controller = controller;
  setBusy(true);
  $("status").textContent = "solving…";
  const doc = jobDocument();
  const started = performance.now();
  try {
    const { ok, data } = await fetchJSON("/page/solve", {
      method: "POST",
      headers: postHeaders(),
      body: JSON.stringify(doc),
      signal: controller.signal,
    });
    if (seq !== state.seq) return; // a later request replaced this one
    if (!ok) {
      showError(data.detail || JSON.stringify(data));
      $("status").textContent = "";
    } else {
      state.doc = doc;
      state.bundle = data;
      state.answered = true;
      showAnswer(data);
      $("status").textContent = `answered in ${((performance.now() - started) / 1000).toFixed(1)} s`;
    }
  } catch (err) {
    if (seq !== state.seq) return; // aborted for a later request
    showError(`no answer from the server: ${err}`);
    $("status").textContent = "";
  } finally {
    if (seq === state.seq) {
      state.controller = null;
      setBusy(false);
    }
  }
}

// An error replaces the answer: the verdict, charts and tables of the last good answer go with it.
function showError(text) {
  $("error").textContent = text;
  $("error").hidden = false;
  $("answer").hidden = true;
  $("verdict").textContent = "";
  $("verdict").className = "answer";
  state.bundle = null;
  state.shown = null;
}

// ------------------------------------------------------------------ the answer

function planCells(row, plan, label) {
  row.append(el("td", label.label), el("td", label.strategy));
  // a layout that does not fit in memory has no time and no cost (as in the HTML report)
  row.append(el("td", plan.fits ? hours(plan.hours.p50) : "-", "num"), el("td", !plan.fits ? "-" : plan.cost_usd ? usd(plan.cost_usd.p50) : "n/a", "num"));
}

function fillBody(table, rows) {
  const body = $(table).querySelector("tbody");
  body.replaceChildren(...rows);
  if (!rows.length) {
    const empty = el("tr");
    const cell = el("td", "none", "muted");
    cell.colSpan = 7;
    empty.append(cell);
    body.append(empty);
  }
}

function sameLabel(a, b) {
  return Boolean(a && b && a.label === b.label && a.strategy === b.strategy);
}

function showAnswer(bundle) {
  const answer = bundle.answer;
  const labels = bundle.labels;
  $("error").hidden = true;
  $("answer").hidden = false;
  $("whatif").hidden = false;
  $("verdict").textContent = bundle.headline;
  $("verdict").className = answer.best ? "answer" : "answer bad";
  $("infeasible").replaceChildren(...answer.infeasible.map((item) => el("li", `${item.constraint}: ${item.detail}`)));

  drawFrontier(answer, labels);
  fillBody(
    "frontier-table",
    answer.frontier.map((plan, i) => {
      const label = labels[`frontier[${i}]`];
      const row = el("tr");
      row.dataset.key = `frontier[${i}]`;
      const chosen = sameLabel(label, labels.best);
      planCells(row, plan, label);
      row.append(el("td", chosen ? "chosen" : ""));
      row.append(showButton(`frontier[${i}]`, label));
      if (chosen) row.classList.add("chosen");
      return row;
    }),
  );
  fillBody(
    "runners-up",
    answer.runners_up.map((plan, i) => {
      const row = el("tr");
      planCells(row, plan, labels[`runners_up[${i}]`]);
      row.append(el("td", plan.lost_on));
      const price = plan.breakeven_price_usd_per_gpu_hour;
      const scaling = plan.breakeven_scaling_efficiency;
      row.append(el("td", price ? `${usd(price)}/GPU-h` : "-", "num"), el("td", scaling ? `${(scaling * 100).toFixed(1)} %` : "-", "num"));
      row.dataset.key = `runners_up[${i}]`;
      row.append(showButton(`runners_up[${i}]`, labels[`runners_up[${i}]`]));
      return row;
    }),
  );
  $("notes").replaceChildren(...answer.notes.map((note) => el("li", note)));

  // ask it again: the command, the job file, the API call
  $("command").textContent = `${bundle.command}\n${bundle.command} --format json`;
  $("flags-command").textContent = bundle.flags_command || "";
  $("flags").hidden = !bundle.flags_command;
  const auth = TOKEN ? ` -H "Authorization: Bearer $GPUPLAN_TOKEN"` : "";
  $("curl").textContent = `curl -s -X POST --data-binary @job.yaml -H 'Content-Type: application/yaml'${auth} ${location.origin}/v1/solve`;
  $("job-yaml").textContent = bundle.job_yaml;
  setDownload($("job-download"), bundle.job_yaml, "job.yaml");

  // export: the chosen plan's framework first where it has an export of its own
  const select = $("export-kind");
  if (!select.options.length) {
    for (const kind of bundle.export_kinds) select.append(new Option(kind, kind));
  }
  if (!state.exportChosen) select.value = bundle.default_export;

  showPlan(answer.best ? "best" : null);
  syncWhatIf(answer);
}

// a table cell with a button that shows the answer's plan `key`
function showButton(key, label) {
  const cell = el("td");
  const show = el("button", "show", "small");
  show.type = "button";
  show.setAttribute("aria-label", `show ${label.label}`);
  show.addEventListener("click", () => {
    showPlan(key);
    $("shown").scrollIntoView({ block: "nearest" });
  });
  cell.append(show);
  return cell;
}

// the answer's plan by its key: "best", "frontier[2]", "runners_up[0]"
function planAt(answer, key) {
  if (key === "best") return answer.best;
  const match = /^(frontier|runners_up)\[(\d+)\]$/.exec(key || "");
  return match ? answer[match[1]][Number(match[2])] || null : null;
}

// A plan of the answer ("best", "frontier[2]", "runners_up[0]"): its figures, its memory bar, its export and its check.
function showPlan(key) {
  const bundle = state.bundle;
  const plan = bundle ? planAt(bundle.answer, key) : null;
  const label = plan ? bundle.labels[key] : null;
  state.shown = plan ? { key, plan, label } : null;
  state.exportSeq = (state.exportSeq || 0) + 1; // an export in flight was of the plan shown before
  $("export-status").textContent = "";
  $("shown").hidden = !plan;
  $("export").disabled = !plan;
  $("export-text").hidden = true;
  $("export-download").hidden = true;
  for (const row of document.querySelectorAll("#frontier-table tbody tr, #runners-up tbody tr")) {
    row.classList.toggle("shown", Boolean(label) && sameLabel(bundle.labels[row.dataset.key], label));
  }
  for (const point of document.querySelectorAll("#frontier circle")) {
    const on = Boolean(label) && sameLabel(bundle.labels[point.dataset.key], label);
    point.setAttribute("stroke", on ? "#1d2433" : "none");
    point.setAttribute("stroke-width", on ? "2" : "0");
    point.setAttribute("aria-pressed", String(on));
  }
  $("frontier").dataset.shown = label ? label.label : "";
  if (!plan) {
    drawMemory($("memory"), $("memory-legend"), null);
    $("memory-headroom").textContent = "";
    return;
  }
  $("shown-label").textContent = label.label;
  $("shown-strategy").textContent = label.strategy;
  const figures = [
    ["hours p50 / p90", plan.fits ? `${hours(plan.hours.p50)} / ${hours(plan.hours.p90)}` : "does not fit"],
    ["cost p50 / p90", plan.fits && plan.cost_usd ? `${usd(plan.cost_usd.p50)} / ${usd(plan.cost_usd.p90)}` : "n/a"],
    ["price", plan.price_usd_per_gpu_hour ? `${usd(plan.price_usd_per_gpu_hour)}/GPU-h${plan.spot ? " (spot)" : ""}` : "n/a"],
    ["memory per GPU", `${gib(plan.memory_gib.total)} of ${gib(plan.memory_gib.capacity)}`],
    ["MFU", plan.mfu ? `${(plan.mfu * 100).toFixed(1)} %` : "n/a"],
  ];
  $("shown-figures").replaceChildren(...figures.flatMap(([name, value]) => [el("dt", name), el("dd", value)]));
  drawMemory($("memory"), $("memory-legend"), plan);
  const headroom = bundle.answer.notes.find((note) => note.startsWith("memory headroom"));
  $("memory-headroom").textContent = headroom || "";
}

function setDownload(link, text, name) {
  if (link.href && link.href.startsWith("blob:")) URL.revokeObjectURL(link.href);
  link.href = URL.createObjectURL(new Blob([text], { type: "text/plain" }));
  link.download = name;
}

// ------------------------------------------------------------------ charts

// The cost/time frontier (present/report.py's chart, drawn here): a point per frontier plan with a cost, each
// one a button that shows its plan.
function drawFrontier(answer, labels) {
  const figure = $("frontier");
  figure.dataset.best = labels.best ? labels.best.label : "";
  const points = answer.frontier.map((plan, i) => ({ plan, key: `frontier[${i}]` })).filter((p) => p.plan.cost_usd);
  if (!points.length) {
    figure.replaceChildren(el("p", "No frontier to draw.", "muted"));
    return;
  }
  const width = 720, height = 330, left = 80, right = 20, top = 20, bottom = 50;
  const xs = points.map((p) => p.plan.hours.p50).concat(answer.deadline_h ? [answer.deadline_h] : []);
  const ys = points.map((p) => p.plan.cost_usd.p50).concat(answer.budget_usd ? [answer.budget_usd] : []);
  const x0 = 0, x1 = Math.max(...xs) * 1.08;
  const y0 = Math.min(...ys) * 0.9, y1 = Math.max(...ys) * 1.08 || 1;
  const sx = (x) => left + ((x - x0) / (x1 - x0)) * (width - left - right);
  const sy = (y) => height - bottom - ((y - y0) / (y1 - y0 || 1)) * (height - top - bottom);
  const chart = svg("svg", { width, height, viewBox: `0 0 ${width} ${height}`, role: "group", "aria-label": "cost/time frontier" });
  chart.append(svg("line", { x1: left, y1: height - bottom, x2: width - right, y2: height - bottom, stroke: "#333" }));
  chart.append(svg("line", { x1: left, y1: top, x2: left, y2: height - bottom, stroke: "#333" }));
  for (let k = 0; k < 5; k++) {
    const xv = x0 + ((x1 - x0) * k) / 4, yv = y0 + ((y1 - y0) * k) / 4;
    chart.append(svg("text", { x: sx(xv).toFixed(0), y: height - bottom + 18, "font-size": 11, "text-anchor": "middle" }, `${Math.round(xv).toLocaleString("en-US")} h`));
    chart.append(svg("text", { x: left - 6, y: (sy(yv) + 4).toFixed(0), "font-size": 11, "text-anchor": "end" }, `$${Math.round(yv).toLocaleString("en-US")}`));
  }
  chart.append(svg("text", { x: (left + width) / 2, y: height - 8, "font-size": 12, "text-anchor": "middle" }, "hours (p50)"));
  if (answer.deadline_h) {
    const x = sx(answer.deadline_h).toFixed(1);
    chart.append(svg("line", { x1: x, y1: top, x2: x, y2: height - bottom, stroke: "#b33", "stroke-dasharray": "5,4" }));
    chart.append(svg("text", { x: Number(x) + 4, y: top + 12, "font-size": 11, fill: "#b33" }, "deadline"));
  }
  if (answer.budget_usd) {
    const y = sy(answer.budget_usd).toFixed(1);
    chart.append(svg("line", { x1: left, y1: y, x2: width - right, y2: y, stroke: "#b36b00", "stroke-dasharray": "2,3" }));
  }
  const path = points.map((p, i) => `${i ? "L" : "M"}${sx(p.plan.hours.p50).toFixed(1)},${sy(p.plan.cost_usd.p50).toFixed(1)}`).join(" ");
  chart.append(svg("path", { d: path, fill: "none", stroke: POINT, "stroke-width": 2 }));
  for (const { plan, key } of points) {
    const label = labels[key];
    const chosen = sameLabel(label, labels.best);
    const x = sx(plan.hours.p50), y = sy(plan.cost_usd.p50);
    const summary = `${label.label}: ${usd(plan.cost_usd.p50)}, ${hours(plan.hours.p50)}`;
    const point = svg("circle", { cx: x.toFixed(1), cy: y.toFixed(1), r: chosen ? 7 : 4, fill: chosen ? CHOSEN : POINT, tabindex: 0, role: "button", "aria-label": `show ${summary}`, class: "point" });
    point.dataset.key = key;
    point.append(svg("title", {}, summary));
    point.addEventListener("click", () => showPlan(key));
    point.addEventListener("keydown", (event) => {
      if (event.key === "Enter" || event.key === " ") {
        event.preventDefault();
        showPlan(key);
      }
    });
    chart.append(point);
    chart.append(svg("text", { x: (x + 8).toFixed(1), y: (y - 6).toFixed(1), "font-size": 11 }, `${plan.nodes}x${plan.gpus_per_node} ${plan.sku}`));
  }
  figure.replaceChildren(chart);
}

const MEMORY_PARTS = [
  ["weights", "#3566b0"],
  ["gradients", "#6c8fd1"],
  ["optimizer", "#b36b00"],
  ["activations", "#2f8f46"],
  ["optimizer_step", "#d19a3a"],
  ["reserve", "#8a8f99"],
];

// A plan's memory per GPU as one bar: each part labelled with its GiB where it has room (all of them in the
// legend), the capacity as a red line and, where the answer states one, the headroom as an orange one.
function drawMemory(figure, legend, plan) {
  if (!plan) {
    figure.replaceChildren(el("p", "No plan, so no memory breakdown.", "muted"));
    legend.replaceChildren();
    return;
  }
  const memory = plan.memory_gib;
  const width = 720, height = 78, barTop = 10, barHeight = 26;
  const headroom = typeof memory.headroom === "number" ? memory.headroom : null;
  const scale = (width - 2) / Math.max(memory.total, memory.capacity);
  const chart = svg("svg", { width, height, viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": `memory per GPU: ${gib(memory.total)} of ${gib(memory.capacity)}` });
  const items = [];
  let x = 0;
  for (const [name, color] of MEMORY_PARTS) {
    const value = memory[name];
    if (typeof value !== "number" || value <= 0) continue;
    const w = value * scale;
    const part = svg("rect", { x: x.toFixed(1), y: barTop, width: w.toFixed(1), height: barHeight, fill: color, "data-part": name, "data-gib": value.toFixed(1) });
    part.append(svg("title", {}, `${name}: ${gib(value)}`));
    chart.append(part);
    const text = w >= 118 ? `${name} ${gib(value)}` : w >= 56 ? gib(value) : w >= 24 ? value.toFixed(1) : "";
    if (text) chart.append(svg("text", { x: (x + 4).toFixed(1), y: barTop + 17, "font-size": 11, fill: "white", "data-part": name }, text));
    const item = el("li");
    const swatch = el("span", "", "swatch");
    swatch.style.background = color;
    item.append(swatch, `${name}: ${gib(value)}`);
    item.dataset.part = name;
    items.push(item);
    x += w;
  }
  const capacity = memory.capacity * scale;
  chart.append(svg("line", { x1: capacity.toFixed(1), y1: 4, x2: capacity.toFixed(1), y2: barTop + barHeight + 6, stroke: "#b33", "stroke-width": 2, "data-line": "capacity" }));
  let caption = `${gib(memory.total)} of ${gib(memory.capacity)} (${memory.basis} capacity)`;
  // what the parts count twice: the activations and the gradients (or the optimizer step's temporaries) are never held at once
  if (typeof memory.not_concurrent === "number" && memory.not_concurrent >= 0.05) caption += `; ${gib(memory.not_concurrent)} of the parts never held at once`;
  if (headroom !== null && headroom > 0) {
    const at = (memory.capacity - headroom) * scale;
    chart.append(svg("line", { x1: at.toFixed(1), y1: 4, x2: at.toFixed(1), y2: barTop + barHeight + 6, stroke: "#b36b00", "stroke-width": 2, "stroke-dasharray": "3,2", "data-line": "headroom" }));
    caption += `; headroom ${gib(headroom)} (fits up to ${gib(memory.capacity - headroom)})`;
    const item = el("li", `headroom: ${gib(headroom)}`);
    item.dataset.part = "headroom";
    items.push(item);
  }
  chart.append(svg("text", { x: 0, y: height - 10, "font-size": 11 }, caption));
  figure.replaceChildren(chart);
  legend.replaceChildren(...items);
}

// ------------------------------------------------------------------ what if

function syncWhatIf(answer) {
  const deadline = $("whatif-deadline");
  if (answer.deadline_h) {
    deadline.value = Math.min(Number(deadline.max), answer.deadline_h / 24);
    $("whatif-deadline-text").textContent = `${(answer.deadline_h / 24).toLocaleString("en-US", { maximumFractionDigits: 1 })} days`;
  } else {
    $("whatif-deadline-text").textContent = "none";
  }
  const budget = $("whatif-budget");
  const costs = answer.frontier.filter((p) => p.cost_usd).map((p) => p.cost_usd.p90);
  if (costs.length) budget.max = Math.max(Number(budget.max), Math.ceil((Math.max(...costs) * 1.5) / 1000) * 1000);
  budget.value = answer.budget_usd || 0;
  $("whatif-budget-text").textContent = answer.budget_usd ? usd(answer.budget_usd) : "none";
}

// Each move (a drag, an arrow key) writes the form at once and drops the solve in flight, so an older answer
// never moves the slider back; the solve starts once the slider rests.
function whatIfDeadline() {
  const days = Number($("whatif-deadline").value);
  $("deadline").value = `${days}d`;
  $("whatif-deadline-text").textContent = `${days} days`;
  solveSoon(WHATIF_DEBOUNCE_MS);
}

function whatIfBudget() {
  const value = Number($("whatif-budget").value);
  $("budget").value = value > 0 ? `$${value}` : "";
  $("whatif-budget-text").textContent = value > 0 ? usd(value) : "none";
  solveSoon(WHATIF_DEBOUNCE_MS);
}

// ------------------------------------------------------------------ export

// The shown plan's launcher config. Its answer is dropped where another plan was shown (or another export
// asked for) meanwhile: an export never appears under a plan it is not of.
async function exportPlan() {
  if (!state.bundle || !state.shown) return;
  state.exportSeq = (state.exportSeq || 0) + 1;
  const seq = state.exportSeq;
  const kind = $("export-kind").value;
  const body = { ...state.doc, export: { kind, plan: state.shown.plan } };
  $("export-status").textContent = `exporting ${kind}…`;
  let text = null;
  let failed = null;
  let name = `${kind}.txt`;
  try {
    const response = await fetch("/v1/export", { method: "POST", headers: postHeaders(), body: JSON.stringify(body) });
    text = await response.text();
    if (!response.ok) {
      failed = text;
      try {
        failed = JSON.parse(text).detail;
      } catch (_) {
        /* the text as it came */
      }
    }
    const match = /filename="([^"]+)"/.exec(response.headers.get("Content-Disposition") || "");
    if (match) name = match[1];
  } catch (err) {
    failed = `no answer from the server: ${err}`;
  }
  if (seq !== state.exportSeq) return;
  $("export-status").textContent = "";
  const pre = $("export-text");
  pre.hidden = false;
  pre.textContent = failed || text;
  pre.className = failed ? "bad" : "";
  $("export-download").hidden = Boolean(failed);
  if (!failed) setDownload($("export-download"), text, name);
}

// ------------------------------------------------------------------ check a layout

// /v1/check's layout counts (bodies.CheckFields), each a number field "check-NAME" of the form
const CHECK_COUNTS = ["gpus", "nodes", "tp", "pp", "shard_degree", "virtual_stages", "cp", "ep", "expert_tp", "micro_batch", "grad_accum"];

// the check form as /v1/check's check: mapping; an empty field stays out (gpuplan chooses, as check's flags)
function checkFields() {
  const check = { sku: $("check-sku").value.trim() };
  for (const name of CHECK_COUNTS) {
    const value = count(`check-${name}`);
    if (value !== null) check[name] = value;
  }
  if ($("check-zero").value) check.zero = Number($("check-zero").value);
  if ($("check-recompute").value.trim()) check.recompute = $("check-recompute").value.trim();
  if ($("check-offload").value) check.offload = $("check-offload").value;
  if ($("check-framework").value) check.framework = $("check-framework").value;
  if ($("check-spot").checked) check.spot = true;
  return check;
}

// a plan's recompute as check takes it: layers:N where full recompute re-runs N layers of each stage
function recomputeOf(strategy) {
  if (!strategy.recompute) return "";
  return strategy.recompute === "full" && strategy.recompute_layers ? `layers:${strategy.recompute_layers}` : strategy.recompute;
}

// a plan's hardware and whole layout into the check form, so that checking it answers for that plan
function fillCheck(plan) {
  const strategy = plan.strategy;
  $("check-sku").value = plan.offer || plan.sku;
  const values = {
    gpus: plan.gpus,
    nodes: plan.nodes,
    tp: strategy.tp,
    pp: strategy.pp,
    shard_degree: strategy.shard_degree,
    virtual_stages: strategy.virtual_stages,
    cp: strategy.cp,
    ep: strategy.ep,
    expert_tp: strategy.expert_tp,
    micro_batch: strategy.micro_batch,
    grad_accum: strategy.grad_accum,
  };
  for (const [name, value] of Object.entries(values)) $(`check-${name}`).value = value ?? "";
  $("check-zero").value = strategy.zero_stage === null || strategy.zero_stage === undefined ? "" : String(strategy.zero_stage);
  $("check-recompute").value = recomputeOf(strategy);
  $("check-offload").value = strategy.offload || "";
  const framework = $("check-framework");
  framework.value = [...framework.options].some((option) => option.value === strategy.framework) ? strategy.framework : "";
  $("check-spot").checked = Boolean(plan.spot);
}

// "Check this layout": the plan shown, checked at once; its form stays filled to change a field and check again
function checkShown() {
  if (state.shown) checkPlan(state.shown.plan, state.doc);
}

// a plan of an answer checked against the job that answer is of (`doc`), though the form has changed since
function checkPlan(plan, doc) {
  fillCheck(plan);
  $("check").scrollIntoView({ block: "start" });
  checkLayout(doc);
}

function checkVerdict(result) {
  const where = `${result.gpus} x ${result.sku} (${result.offer}${result.spot ? ", spot" : ""})`;
  if (!result.fits) return `${where}: does not fit in memory (${gib(result.memory_gib.total)} of ${gib(result.memory_gib.capacity)} per GPU)`;
  if (!result.runnable) return `${where}: fits, but does not run: ${result.not_runnable_because.join("; ")}`;
  const parts = [`${where}: fits, ${hours(result.hours.p50)}, ${result.cost_usd ? usd(result.cost_usd.p50) : "no price"}`];
  if (result.meets_deadline === false) parts.push("misses the deadline");
  if (result.within_budget === false) parts.push("over the budget");
  if (result.extra_cost_vs_optimum_usd) parts.push(`${usd(result.extra_cost_vs_optimum_usd)} more than the best plan`);
  return parts.join("; ");
}

function showCheck(text, bad, result) {
  $("check-result").hidden = false;
  $("check-verdict").textContent = text;
  $("check-verdict").className = bad ? "answer bad" : "answer";
  const details = [];
  if (result) {
    if (result.chosen && result.chosen.length) details.push(`gpuplan chose: ${result.chosen.join(", ")}`);
    if (result.added) details.push(result.added);
    for (const note of result.notes || []) details.push(note);
    for (const plan of result.dominated_by || []) details.push(`dominated by ${plan.gpus} x ${plan.sku} (${plan.offer})`);
  }
  $("check-details").replaceChildren(...details.map((line) => el("li", line)));
  drawMemory($("check-memory"), $("check-memory-legend"), result);
}

// the check form's layout on `doc` (default: the job the form holds now)
async function checkLayout(doc) {
  state.checkSeq += 1;
  const seq = state.checkSeq;
  if (state.checkController) state.checkController.abort();
  const controller = new AbortController();
  state.checkController = controller;
  $("check-run").disabled = true;
  $("check-status").textContent = "checking…";
  const body = { ...(doc || jobDocument()), check: checkFields() };
  try {
    const { ok, data } = await fetchJSON("/v1/check", { method: "POST", headers: postHeaders(), body: JSON.stringify(body), signal: controller.signal });
    if (seq !== state.checkSeq) return;
    if (!ok) showCheck(data.detail || JSON.stringify(data), true, null);
    else showCheck(checkVerdict(data), !data.fits || !data.runnable, data);
  } catch (err) {
    if (seq !== state.checkSeq) return;
    showCheck(`no answer from the server: ${err}`, true, null);
  } finally {
    if (seq === state.checkSeq) {
      state.checkController = null;
      $("check-run").disabled = false;
      $("check-status").textContent = "";
    }
  }
}

// ------------------------------------------------------------------ every option

// a plan's label as the CLI prints it (results.Plan.label): "4 x 8 B200 (nodus-b200)", "8 H100-SXM"
function planLabel(plan) {
  const per = plan.nodes > 1 ? `${plan.nodes} x ${plan.gpus_per_node}` : `${plan.gpus}`;
  return `${per} ${plan.sku}` + (plan.offer ? ` (${plan.offer})` : "");
}

// a layout in short, as render.strategy_text writes it
function strategyText(plan) {
  const s = plan.strategy;
  const parts = [];
  if (s.tp > 1) parts.push(`TP ${s.tp}`);
  if (s.pp > 1) parts.push(`PP ${s.pp}`);
  if (s.cp > 1) parts.push(`CP ${s.cp}`);
  if (s.ep > 1) parts.push(`EP ${s.ep}`);
  if (s.expert_tp !== null && s.expert_tp !== undefined && s.expert_tp !== s.tp) parts.push(`expert TP ${s.expert_tp}`);
  if (s.dp > 1) {
    if (s.zero_stage === 0) parts.push(`DP ${s.dp}`);
    else if (s.shard_degree < s.dp) parts.push(`ZeRO-${s.zero_stage}/${s.shard_degree} hybrid of DP ${s.dp}`);
    else parts.push(`ZeRO-${s.zero_stage} DP ${s.dp}`);
  }
  parts.push(`mb ${s.micro_batch}x${s.grad_accum}`);
  const recompute = recomputeOf(s);
  if (recompute && recompute !== "none") parts.push(`recompute ${recompute}`);
  if (s.virtual_stages > 1) parts.push(`${s.virtual_stages} chunks/GPU`);
  if (s.offload !== "none") parts.push("optimizer offloaded to CPU");
  return `${s.framework}: ${parts.join(", ")}`;
}

// the options' one line, as render.options_headline writes it
function optionsHeadline(options) {
  const rejected = {};
  for (const option of options) if (!option.feasible) rejected[option.rejected_by] = (rejected[option.rejected_by] || 0) + 1;
  const feasible = options.length - Object.values(rejected).reduce((a, b) => a + b, 0);
  const why = Object.entries(rejected)
    .sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0))
    .map(([reason, n]) => `${reason} ${n}`)
    .join(", ");
  return `${options.length} hardware options, ${feasible} feasible` + (why ? `; rejected by ${why}` : "");
}

async function listOptions() {
  state.optionsSeq = (state.optionsSeq || 0) + 1;
  const seq = state.optionsSeq;
  $("options-show").disabled = true;
  $("options-status").textContent = "listing…";
  let result = null;
  let failed = null;
  try {
    const doc = jobDocument();
    const { ok, data } = await fetchJSON("/v1/options", { method: "POST", headers: postHeaders(), body: JSON.stringify(doc) });
    if (ok) data.doc = doc;
    if (ok) result = data;
    else failed = data.detail || JSON.stringify(data);
  } catch (err) {
    failed = `no answer from the server: ${err}`;
  }
  if (seq !== state.optionsSeq) return;
  $("options-show").disabled = false;
  $("options-status").textContent = "";
  $("options-verdict").hidden = false;
  $("options-verdict").textContent = failed || optionsHeadline(result.options);
  $("options-verdict").className = failed ? "answer bad" : "answer";
  $("options-table").hidden = Boolean(failed);
  const rows = (result ? result.options : []).map((option) => {
    const row = el("tr", undefined, option.feasible ? "" : "rejected");
    row.append(
      el("td", planLabel(option)),
      el("td", strategyText(option)),
      el("td", `${Math.round(option.memory_gib.total)}/${Math.round(option.memory_gib.capacity)}`, "num"),
      el("td", option.fits ? hours(option.hours.p50) : "-", "num"),
      el("td", !option.fits ? "-" : option.cost_usd ? usd(option.cost_usd.p50) : "n/a", "num"),
      el("td", option.feasible ? "ok" : `rejected: ${option.rejected_by}`),
    );
    const cell = el("td");
    const check = el("button", "check", "small");
    check.type = "button";
    check.setAttribute("aria-label", `check ${planLabel(option)}`);
    check.addEventListener("click", () => checkPlan(option, result.doc));
    cell.append(check);
    row.append(cell);
    return row;
  });
  fillBody("options-table", rows);
  $("options-notes").replaceChildren(...(result ? result.notes : []).map((note) => el("li", note)));
}

// ------------------------------------------------------------------ a portfolio

const PORTFOLIO_EXAMPLE = `# Two fine-tunes sharing a reserved B200 node within one budget
# (problems/portfolio-q1-finetunes.yaml has more: windows, priorities, jobs run one after another)
catalog: default
horizon: 14d
budget: $5,000
objective: cost
pools:
  - offer: nodus-b200
    gpus: 8
jobs:
  - name: llama8b-lora
    file: llama-8b-lora.yaml
    deadline: 4d
  - name: llama70b-qlora
    file: llama-70b-qlora.yaml
    deadline: 10d
`;

function portfolioVerdict(result) {
  const parts = [`${result.status}: ${usd(result.total_cost_usd)} in all`];
  if (result.budget_usd) parts[0] += ` of a ${usd(result.budget_usd)} budget`;
  if (result.makespan_h !== null && result.makespan_h !== undefined) parts.push(`the last job done after ${hours(result.makespan_h)}`);
  parts.push(`${result.schedule.length} job(s) scheduled`);
  if (result.dropped.length) parts.push(`${result.dropped.length} dropped`);
  return parts.join(", ");
}

async function planPortfolio() {
  state.portfolioSeq = (state.portfolioSeq || 0) + 1;
  const seq = state.portfolioSeq;
  $("portfolio-run").disabled = true;
  $("portfolio-status").textContent = "planning…";
  const text = $("portfolio-text").value;
  const headers = { ...postHeaders(), "Content-Type": text.trimStart().startsWith("{") ? "application/json" : "application/yaml" };
  let result = null;
  let failed = null;
  try {
    const { ok, data } = await fetchJSON("/v1/portfolio", { method: "POST", headers, body: text });
    if (ok) result = data;
    else failed = data.detail || JSON.stringify(data);
  } catch (err) {
    failed = `no answer from the server: ${err}`;
  }
  if (seq !== state.portfolioSeq) return;
  $("portfolio-run").disabled = false;
  $("portfolio-status").textContent = "";
  $("portfolio-result").hidden = false;
  $("portfolio-verdict").textContent = failed || portfolioVerdict(result);
  $("portfolio-verdict").className = failed || !result.schedule.length ? "answer bad" : "answer";
  $("portfolio-schedule").hidden = Boolean(failed);
  const rows = (result ? result.schedule : []).map((item) => {
    const row = el("tr");
    const plan = item.plan;
    row.append(
      el("td", item.job),
      el("td", plan.offer || item.offer),
      el("td", `${plan.nodes} x ${plan.gpus_per_node} ${plan.sku}`),
      el("td", item.start_date || `${hours(item.start_h)}`),
      el("td", item.end_date || `${hours(item.end_h)}`),
      el("td", usd(item.cost_usd), "num"),
      el("td", item.late_h ? hours(item.late_h) : "-", "num"),
    );
    return row;
  });
  fillBody("portfolio-schedule", rows);
  const notes = result
    ? [
        ...result.dropped.map((item) => `dropped ${item.job}: ${item.reason}`),
        ...result.infeasible.map((item) => (typeof item === "string" ? item : `${item.constraint || item.job || ""}: ${item.detail || item.reason || ""}`)),
        ...result.notes,
      ]
    : [];
  $("portfolio-notes").replaceChildren(...notes.map((note) => el("li", note)));
  $("portfolio-pool-use").hidden = Boolean(failed);
  fillBody(
    "portfolio-pools",
    (result ? result.pools : []).map((pool) => {
      const row = el("tr");
      row.dataset.offer = pool.offer;
      const chart = el("td");
      chart.append(drawPoolUse(pool, result.horizon_h || result.makespan_h || 1));
      row.append(el("td", pool.offer), el("td", pool.gpus, "num"), el("td", pool.peak_used, "num"), chart);
      return row;
    }),
  );
}

// (hour, GPUs) changes as a step line to the horizon, scaled to the chart
function steps(points, horizon, sx, sy) {
  if (!points.length) return "";
  const parts = [];
  let last = null;
  for (const [hour, gpus] of points) {
    if (last !== null) parts.push(`L${sx(hour).toFixed(1)},${sy(last).toFixed(1)}`);
    parts.push(`${parts.length ? "L" : "M"}${sx(hour).toFixed(1)},${sy(gpus).toFixed(1)}`);
    last = gpus;
  }
  parts.push(`L${sx(horizon).toFixed(1)},${sy(last).toFixed(1)}`);
  return parts.join(" ");
}

// A pool's use: its capacity as a grey area, the GPUs in use as a line, over the portfolio's horizon.
function drawPoolUse(pool, horizon) {
  const width = 260, height = 44, pad = 2;
  const capacity = pool.capacity.length ? pool.capacity : [[0, pool.gpus]];
  const most = Math.max(1, pool.gpus, ...capacity.map((p) => p[1]), ...pool.timeline.map((p) => p[1]));
  const sx = (hour) => pad + (Math.min(hour, horizon) / horizon) * (width - 2 * pad);
  const sy = (gpus) => height - pad - (gpus / most) * (height - 2 * pad);
  const chart = svg("svg", { width, height, viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": `${pool.offer}: at most ${pool.peak_used} of ${pool.gpus} GPUs in use` });
  const area = steps(capacity, horizon, sx, sy);
  chart.append(svg("path", { d: `${area} L${sx(horizon).toFixed(1)},${sy(0).toFixed(1)} L${sx(capacity[0][0]).toFixed(1)},${sy(0).toFixed(1)} Z`, fill: "#e3e6ec", "data-line": "capacity" }));
  if (pool.timeline.length) chart.append(svg("path", { d: steps(pool.timeline, horizon, sx, sy), fill: "none", stroke: POINT, "stroke-width": 2, "data-line": "in-use" }));
  chart.append(svg("title", {}, `${pool.offer}: at most ${pool.peak_used} of ${pool.gpus} GPUs in use`));
  return chart;
}

// a portfolio file opened here: its text into the box (the browser reads it; the server sees it on Plan)
async function openPortfolioFile() {
  const file = $("portfolio-file").files[0];
  if (!file) return;
  $("portfolio-text").value = await file.text();
  $("portfolio-status").textContent = `${file.name} opened`;
}

// ------------------------------------------------------------------ the catalog

async function showCatalog() {
  const name = $("catalog").value;
  const { ok, data } = await fetchJSON(`/v1/catalogs/${encodeURIComponent(name)}`);
  if (name !== $("catalog").value) return; // another catalog chosen meanwhile: its listing shows
  const table = $("catalog-table");
  if (!ok) {
    $("catalog-description").textContent = data.detail || `no catalog ${name}`;
    table.hidden = true;
    return;
  }
  $("catalog-description").textContent = `${data.catalog}: ${data.description || "no description"}`;
  const rows = data.rows.map((row) => {
    const tr = el("tr");
    tr.append(
      el("td", row.sku),
      el("td", row.offer || "-"),
      el("td", row.provider || "-"),
      el("td", row.usable_gib ? gib(row.usable_gib) : "-", "num"),
      el("td", row.gpus_per_node ?? "-", "num"),
      el("td", row.max_nodes ?? "-", "num"),
      el("td", row.price_usd_per_gpu_hour ? usd(row.price_usd_per_gpu_hour) : "-", "num"),
      el("td", row.spot_price_usd_per_gpu_hour ? usd(row.spot_price_usd_per_gpu_hour) : "-", "num"),
      el("td", row.dense_bf16_tflops ? row.dense_bf16_tflops.toLocaleString("en-US") : "-", "num"),
      el("td", row.illustrative ? "illustrative price" : row.price_checked ? `checked ${row.price_checked}` : "", "muted"),
    );
    return tr;
  });
  fillBody("catalog-table", rows);
  table.hidden = false;
}

// every catalog the server offers (GET /v1/catalogs), each a button that makes it the form's and lists its offers
function listCatalogs(catalogs) {
  fillBody(
    "catalog-list",
    catalogs.map((catalog) => {
      const row = el("tr", undefined, catalog.name === $("catalog").value ? "chosen" : "");
      row.dataset.catalog = catalog.name;
      row.append(
        el("td", catalog.name),
        el("td", catalog.bundled ? "bundled" : "gpuplan serve --catalog"),
        el("td", catalog.offers, "num"),
        el("td", catalog.gpus.join(", ") || "-"),
        el("td", catalog.description || "", "muted"),
      );
      const cell = el("td");
      const show = el("button", "show", "small");
      show.type = "button";
      show.setAttribute("aria-label", `show catalog ${catalog.name}`);
      show.addEventListener("click", async () => {
        $("catalog").value = catalog.name;
        await loadCatalogTypes();
        if ($("catalog-table").hidden) await showCatalog();
      });
      cell.append(show);
      row.append(cell);
      return row;
    }),
  );
}

// ------------------------------------------------------------------ start

function tickBox(value) {
  const label = el("label");
  const input = el("input");
  input.type = "checkbox";
  input.value = value;
  label.append(input, ` ${value}`);
  return label;
}

// the chosen catalog's GPU types and providers as boxes to tick (constraints.gpu.types, .providers)
async function loadCatalogTypes() {
  const name = $("catalog").value;
  const [all, listing] = await Promise.all([fetchJSON(`/v1/catalogs`), fetchJSON(`/v1/catalogs/${encodeURIComponent(name)}`)]);
  if (!all.ok || name !== $("catalog").value) return; // another catalog chosen meanwhile: its answer shows
  listCatalogs(all.data.catalogs);
  const chosen = all.data.catalogs.find((c) => c.name === name);
  const gpus = chosen ? chosen.gpus : [];
  $("gpu-types").replaceChildren(...gpus.map(tickBox));
  $("check-skus").replaceChildren(...gpus.map((gpu) => new Option(gpu, gpu)));
  const providers = listing.ok ? [...new Set(listing.data.rows.map((row) => row.provider).filter(Boolean))].sort() : [];
  $("gpu-providers").replaceChildren(...providers.map(tickBox));
  if (!$("catalog-table").hidden) await showCatalog();
}

async function loadPrecisions() {
  const { ok, data } = await fetchJSON("/v1/schema/job");
  const field = ok && data.$defs && data.$defs.JobSpec ? data.$defs.JobSpec.properties.precision : null;
  if (!field || !Array.isArray(field.enum)) return;
  const select = $("precision");
  select.replaceChildren(new Option(`${field.default} (default)`, ""));
  for (const name of field.enum) if (name !== field.default) select.append(new Option(name, name));
}

// ------------------------------------------------------------------ every job flag

// The job settings of GET /v1/job-fields (every job field a gpuplan solve flag sets, with its choices, default,
// unit and help) that the form has no control of its own for, each built here as a control with the id of its
// field: a job flag added to the CLI is a control of the page with no HTML to write. A choice or switch left at
// "default" and an empty box stay out of the job, as a flag not given.
const BUILT = [];

function fieldLabel(field) {
  const words = field.name.replace(/_/g, " ");
  return words.charAt(0).toUpperCase() + words.slice(1);
}

function fieldHint(field) {
  const parts = [];
  if (field.unit) parts.push(field.example ? `${field.unit}, e.g. ${field.example}` : field.unit);
  parts.push(field.kind === "choice" || field.kind === "switch" ? `default ${field.default}` : `empty: ${field.default}`);
  if (field.minimum !== null && field.kind === "count") parts.push(`at least ${field.minimum}`);
  return parts.join("; ");
}

function fieldControl(field) {
  let control;
  if (field.kind === "choice" || field.kind === "switch") {
    control = el("select");
    control.append(new Option(`default (${field.default})`, ""));
    for (const choice of field.kind === "switch" ? ["on", "off"] : field.choices) control.append(new Option(choice, choice));
  } else {
    control = el("input");
    if (field.kind !== "text") control.inputMode = field.kind === "count" ? "numeric" : "decimal";
    if (field.example) control.placeholder = `e.g. ${field.example.split(",")[0]}`;
  }
  control.id = field.name;
  control.dataset.flag = field.flag;
  const label = el("label");
  label.title = field.help;
  label.append(`${fieldLabel(field)} `, el("code", field.flag), control, el("small", fieldHint(field)));
  if (field.help !== field.unit) label.append(el("small", field.help, "help")); // no description: the unit says it
  return label;
}

async function loadJobFields() {
  const { ok, data } = await fetchJSON("/v1/job-fields");
  if (!ok) return;
  const built = [];
  for (const field of data.fields) {
    const own = $(field.name);
    if (own) {
      const label = own.closest("label"); // a control of the form's own: the flag's help on it
      if (label) label.title = field.help;
    } else {
      BUILT.push(field);
      built.push(fieldControl(field));
    }
  }
  $("job-fields").replaceChildren(...built);
}

// the built controls' values by job field
function builtFieldValues() {
  const values = {};
  for (const field of BUILT) {
    const value = $(field.name).value.trim();
    if (!value) continue;
    if (field.kind === "switch") values[field.name] = value === "on";
    else if (field.kind === "count" || field.kind === "number") values[field.name] = numberOr(value);
    else values[field.name] = value;
  }
  return values;
}

// --measured's text (GPUs x SKU [@nodes]: rate [, peak]: inputs/overrides.py parse_measurement) as job.measured
// entries, one a line; a line it cannot read is sent as written, and the API names the entry
const MEASURED = /^\s*([0-9]{1,30})\s*[xX*]\s*([A-Za-z0-9._-]+)\s*(?:@\s*([0-9]{1,30}))?\s*:\s*([^,]+?)\s*(?:,\s*(.+?))?\s*$/;

function measuredEntries() {
  const lines = $("measured").value.split("\n").map((line) => line.trim()).filter(Boolean);
  return lines.map((line) => {
    const match = MEASURED.exec(line);
    if (!match) return line;
    const entry = { sku: match[2], gpus: Number(match[1]) };
    if (match[3]) entry.nodes = Number(match[3]);
    entry.tokens_per_s = match[4];
    if (match[5]) entry.peak_memory = match[5];
    return entry;
  });
}

function syncMethod() {
  $("lora-rank-label").hidden = $("method").value === "full";
}

async function start() {
  const [info, models] = await Promise.all([fetchJSON("/v1/info"), fetchJSON("/v1/models"), loadPrecisions(), loadJobFields()]);
  if (info.ok) {
    for (const name of info.data.catalogs) $("catalog").append(new Option(name, name, false, name === info.data.default_catalog));
    for (const name of info.data.frameworks) if (name !== "auto") $("framework").append(new Option(name, name));
    for (const name of info.data.frameworks) $("check-framework").append(new Option(name, name));
  }
  if (models.ok) {
    for (const row of models.data.models) $("presets").append(new Option(row.name, row.name));
  }
  await loadCatalogTypes();
  syncMethod();
  $("method").addEventListener("change", syncMethod);
  $("catalog").addEventListener("change", loadCatalogTypes);
  $("job").addEventListener("submit", (event) => {
    event.preventDefault();
    solve();
  });
  // once there is an answer, the form's deadline and budget re-solve as the what-if controls do
  for (const id of ["deadline", "budget"]) {
    $(id).addEventListener("change", () => {
      if (state.answered) solve();
    });
  }
  $("whatif-deadline").addEventListener("input", whatIfDeadline);
  $("whatif-deadline").addEventListener("change", whatIfDeadline);
  $("whatif-budget").addEventListener("input", whatIfBudget);
  $("whatif-budget").addEventListener("change", whatIfBudget);
  $("export-kind").addEventListener("change", () => (state.exportChosen = true));
  $("export").addEventListener("click", exportPlan);
  $("shown-check").addEventListener("click", checkShown);
  $("check").addEventListener("submit", (event) => {
    event.preventDefault();
    checkLayout();
  });
  $("catalog-show").addEventListener("click", showCatalog);
  $("options-show").addEventListener("click", listOptions);
  $("portfolio-text").value = PORTFOLIO_EXAMPLE;
  $("portfolio-file").addEventListener("change", openPortfolioFile);
  $("portfolio").addEventListener("submit", (event) => {
    event.preventDefault();
    planPortfolio();
  });
  document.body.dataset.ready = "true";
}

document.addEventListener("DOMContentLoaded", start);
