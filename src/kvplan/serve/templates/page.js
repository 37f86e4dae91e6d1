// kvplan serve page: gather the form, POST /api/view, draw the answer. Only moved sliders override the command.
(function () {
  "use strict";
  var $ = function (id) { return document.getElementById(id); };
  var SLIDERS = ["fraction", "host_kv", "hicache_ratio", "tp", "dp", "max_running", "fp8_kv", "dp_attention"];
  var touched = {};
  var seq = 0, timer = null;

  function pow2(el) { return el.getAttribute("data-pow2") === "1"; }
  function sliderValue(name) {
    var el = $(name);
    if (el.type === "checkbox") return el.checked;
    var v = Number(el.value);
    return pow2(el) ? Math.pow(2, v) : v;
  }
  function showValue(name) {
    var el = $(name), out = $(name + "-out"), v = sliderValue(name);
    out.textContent = el.type === "checkbox" ? (v ? "on" : "off") : (name === "fraction" ? v.toFixed(2) : String(v));
  }
  function num(id) { var v = $(id).value.trim(); return v === "" ? null : Number(v); }
  function body() {
    var b = { command: $("command").value, gpu: $("gpu").value, host_mem_gib: num("host_mem_gib"),
              gpus_per_node: num("gpus_per_node"), engine_version: $("engine_version").value.trim() || null, set: {} };
    var cfg = $("model_config").value.trim();
    if (cfg) b.model_config = cfg;
    SLIDERS.forEach(function (n) { if (touched[n]) b.set[n] = sliderValue(n); });
    return b;
  }
  function fmtInt(n) { return n === null || n === undefined ? "–" : Number(n).toLocaleString("en-US"); }
  function fmtHost(b) {
    if (!b) return "0";
    return b >= 1e12 ? (b / 1e12).toFixed(2) + " TB" : (b / 1e9).toFixed(1) + " GB";
  }
  function setSlider(name, v) {
    if (touched[name] || v === null || v === undefined) return;
    var el = $(name);
    if (el.type === "checkbox") el.checked = !!v;
    else el.value = pow2(el) ? Math.round(Math.log2(Math.max(1, v))) : v;
    showValue(name);
  }
  function fromPlan(p, view) {  // view: what the engine says its sliders show (Engine.slider_view)
    var v = view.values || {}, off = view.off || [];
    var frac = v.fraction;
    Object.keys(view.labels || {}).forEach(function (n) {
      var label = $(n + "-label");
      if (label) label.textContent = view.labels[n];
    });
    SLIDERS.forEach(function (n) { if (n in v) setSlider(n, v[n]); });
    SLIDERS.forEach(function (n) {
      var isOff = off.indexOf(n) >= 0;
      $(n).disabled = isOff; document.querySelector('[data-slider="' + n + '"]').classList.toggle("off", isOff);
    });
    var kv = $("kv-tokens");
    kv.textContent = fmtInt(p.per_rank.kv_tokens);
    kv.setAttribute("data-value", p.per_rank.kv_tokens);
    kv.setAttribute("data-planned-fraction", frac === null || frac === undefined ? "" : String(frac));
    $("kv-tokens-replica").textContent = fmtInt(p.per_replica.kv_tokens);
    $("requests-fit").textContent = fmtInt(p.per_replica.requests_fit);
    $("host-kv").textContent = fmtHost(p.per_node.host_kv_bytes);
    $("verdict").textContent = String(p.verdict).toUpperCase();
    $("verdict").className = "verdict-" + p.verdict;
    $("effective-command").textContent = p.command;
  }
  function update() {
    var my = ++seq;
    $("status").textContent = "planning…";
    document.body.setAttribute("data-state", "busy");
    fetch("/api/view", { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body()) })
      .then(function (r) { return r.json().then(function (j) { return { ok: r.ok, j: j }; }); })
      .then(function (res) {
        if (my !== seq) return;
        if (!res.ok) {
          $("error").textContent = "kvplan: error: " + res.j.error;
          $("status").textContent = "not planned";
          document.body.setAttribute("data-state", "error");
          return;
        }
        $("error").textContent = "";
        $("result").innerHTML = res.j.html;
        fromPlan(res.j.plan, res.j.sliders);
        $("status").textContent = "planned " + new Date().toLocaleTimeString();
        document.body.setAttribute("data-state", "ready");
        document.body.setAttribute("data-seq", String(my));
      })
      .catch(function (e) {
        if (my !== seq) return;
        $("error").textContent = "kvplan: error: the server did not answer (" + e + ")";
        document.body.setAttribute("data-state", "error");
      });
  }
  function later() { clearTimeout(timer); timer = setTimeout(update, 150); }
  SLIDERS.forEach(function (n) {
    var el = $(n);
    el.addEventListener(el.type === "checkbox" ? "change" : "input", function () {
      touched[n] = true;
      el.closest(".slider").classList.add("touched");
      showValue(n);
      later();
    });
    showValue(n);
  });
  ["command", "gpu", "host_mem_gib", "engine_version", "gpus_per_node", "model_config"].forEach(function (id) {
    $(id).addEventListener(id === "gpu" ? "change" : "input", later);
  });
  $("reset").addEventListener("click", function () {
    touched = {};
    document.querySelectorAll(".slider.touched").forEach(function (e) { e.classList.remove("touched"); });
    update();
  });
  $("plan-form").addEventListener("submit", function (ev) { ev.preventDefault(); update(); });
  update();
})();
