// The gpuplan page: a form for the job, over the JSON API of `gpuplan serve` (no build step, no framework).
// POST /page/solve answers /v1/solve's JSON with the verdict, the charts (inline SVG drawn by the server)
// and the job file; POST /v1/export the chosen plan's launcher config. Text goes in by textContent alone.
"use strict";

const $ = (id) => document.getElementById(id);
const state = { doc: null, bundle: null, busy: false, again: false };

function el(tag, text, cls) {
  const node = document.createElement(tag);
  if (text !== undefined && text !== null) node.textContent = text;
  if (cls) node.className = cls;
  return node;
}

function usd(value) {
  return value === null || value === undefined ? "n/a" : "$" + value.toLocaleString("en-US", { minimumFractionDigits: 2, maximumFractionDigits: 2 });
}

function hours(value) {
  return value === null || value === undefined ? "n/a" : value.toLocaleString("en-US", { maximumFractionDigits: 1 }) + " h";
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

function jobDocument() {
  const model = $("model").value.trim();
  const job = { name: jobName(model), model, method: $("method").value, tokens: $("tokens").value.trim() };
  if ($("seq_len").value) job.seq_len = Number($("seq_len").value);
  if ($("global_batch").value) job.global_batch = Number($("global_batch").value);
  if ($("framework").value !== "auto") job.framework = $("framework").value;
  const constraints = {};
  if ($("deadline").value.trim()) constraints.deadline = $("deadline").value.trim();
  if ($("budget").value.trim()) constraints.budget = $("budget").value.trim();
  const types = [...document.querySelectorAll("#gpu-types input:checked")].map((box) => box.value);
  if (types.length) constraints.gpu = { types };
  const doc = { catalog: $("catalog").value, objective: $("objective").value, job };
  if (Object.keys(constraints).length) doc.constraints = constraints;
  return doc;
}

async function solve() {
  if (state.busy) {
    state.again = true; // one more solve once this one is back, with the form as it is then
    return;
  }
  state.busy = true;
  $("plan").disabled = true;
  $("status").textContent = "solving…";
  const doc = jobDocument();
  const started = performance.now();
  try {
    const { ok, data } = await fetchJSON("/page/solve", {
      method: "POST",
      headers: postHeaders(),
      body: JSON.stringify(doc),
    });
    if (!ok) {
      showError(data.detail || JSON.stringify(data));
      $("status").textContent = "";
    } else {
      state.doc = doc;
      state.bundle = data;
      showAnswer(data);
      $("status").textContent = `answered in ${((performance.now() - started) / 1000).toFixed(1)} s`;
    }
  } catch (err) {
    showError(`no answer from the server: ${err}`);
    $("status").textContent = "";
  } finally {
    state.busy = false;
    $("plan").disabled = false;
    if (state.again) {
      state.again = false;
      solve();
    }
  }
}

function showError(text) {
  $("error").textContent = text;
  $("error").hidden = false;
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

function showAnswer(bundle) {
  const answer = bundle.answer;
  const labels = bundle.labels;
  $("error").hidden = true;
  $("answer").hidden = false;
  $("verdict").textContent = bundle.headline;
  $("verdict").className = answer.best ? "answer" : "answer bad";
  $("infeasible").replaceChildren(...answer.infeasible.map((item) => el("li", `${item.constraint}: ${item.detail}`)));

  // server-drawn SVG (present/report.py: labels escaped there); the chosen plan's label as an attribute
  $("frontier").innerHTML = bundle.frontier_svg;
  $("frontier").dataset.best = labels.best ? labels.best.label : "";
  $("memory").innerHTML = bundle.memory_svg || "<p class='muted'>No plan, so no memory breakdown.</p>";

  fillBody(
    "frontier-table",
    answer.frontier.map((plan, i) => {
      const label = labels[`frontier[${i}]`];
      const row = el("tr");
      const chosen = labels.best && label.label === labels.best.label && label.strategy === labels.best.strategy;
      planCells(row, plan, label);
      row.append(el("td", chosen ? "chosen" : ""));
      if (chosen) row.className = "chosen";
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
  $("export").disabled = !answer.best;
  $("export-text").hidden = true;
  $("export-download").hidden = true;

  syncWhatIf(answer);
}

function setDownload(link, text, name) {
  if (link.href && link.href.startsWith("blob:")) URL.revokeObjectURL(link.href);
  link.href = URL.createObjectURL(new Blob([text], { type: "text/plain" }));
  link.download = name;
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

function whatIfDeadline() {
  const days = Number($("whatif-deadline").value);
  $("deadline").value = `${days}d`;
  $("whatif-deadline-text").textContent = `${days} days`;
  solve();
}

function whatIfBudget() {
  const value = Number($("whatif-budget").value);
  $("budget").value = value > 0 ? `$${value}` : "";
  $("whatif-budget-text").textContent = value > 0 ? usd(value) : "none";
  solve();
}

// ------------------------------------------------------------------ export

async function exportPlan() {
  if (!state.bundle || !state.bundle.answer.best) return;
  const kind = $("export-kind").value;
  const body = { ...state.doc, export: { kind, plan: state.bundle.answer.best } };
  $("status").textContent = `exporting ${kind}…`;
  const response = await fetch("/v1/export", { method: "POST", headers: postHeaders(), body: JSON.stringify(body) });
  const text = await response.text();
  const pre = $("export-text");
  pre.hidden = false;
  if (!response.ok) {
    let detail = text;
    try {
      detail = JSON.parse(text).detail;
    } catch (_) {
      /* the text as it came */
    }
    pre.textContent = detail;
    pre.className = "bad";
    $("export-download").hidden = true;
  } else {
    pre.textContent = text;
    pre.className = "";
    const match = /filename="([^"]+)"/.exec(response.headers.get("Content-Disposition") || "");
    setDownload($("export-download"), text, match ? match[1] : `${kind}.txt`);
    $("export-download").hidden = false;
  }
  $("status").textContent = "";
}

// ------------------------------------------------------------------ start

async function loadCatalogTypes() {
  const { ok, data } = await fetchJSON(`/v1/catalogs`);
  if (!ok) return;
  const chosen = data.catalogs.find((c) => c.name === $("catalog").value);
  const box = $("gpu-types");
  box.replaceChildren();
  for (const gpu of chosen ? chosen.gpus : []) {
    const label = el("label");
    const input = el("input");
    input.type = "checkbox";
    input.value = gpu;
    label.append(input, ` ${gpu}`);
    box.append(label);
  }
}

async function start() {
  const [info, models] = await Promise.all([fetchJSON("/v1/info"), fetchJSON("/v1/models")]);
  if (info.ok) {
    for (const name of info.data.catalogs) $("catalog").append(new Option(name, name, false, name === info.data.default_catalog));
    for (const name of info.data.frameworks) if (name !== "auto") $("framework").append(new Option(name, name));
  }
  if (models.ok) {
    for (const row of models.data.models) $("presets").append(new Option(row.name, row.name));
  }
  await loadCatalogTypes();
  $("catalog").addEventListener("change", loadCatalogTypes);
  $("job").addEventListener("submit", (event) => {
    event.preventDefault();
    solve();
  });
  // once there is an answer, the form's deadline and budget re-solve as the what-if controls do
  for (const id of ["deadline", "budget"]) {
    $(id).addEventListener("change", () => {
      if (state.bundle) solve();
    });
  }
  $("whatif-deadline").addEventListener("input", () => ($("whatif-deadline-text").textContent = `${$("whatif-deadline").value} days`));
  $("whatif-deadline").addEventListener("change", whatIfDeadline);
  $("whatif-budget").addEventListener("change", whatIfBudget);
  $("export-kind").addEventListener("change", () => (state.exportChosen = true));
  $("export").addEventListener("click", exportPlan);
  document.body.dataset.ready = "true";
}

document.addEventListener("DOMContentLoaded", start);
