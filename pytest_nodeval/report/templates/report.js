(function () {
  "use strict";
  // Every value from the run reaches the page through textContent, createTextNode or
  // setAttribute("title"/"data-*"); nothing from the run is ever parsed as markup.

  var DATA, CASES;  // the run's data, inflated on load (see start() at the end)
  var SVGNS = "http://www.w3.org/2000/svg";
  var SEVERITY = { error: 0, failed: 1, tolerated: 2, passed: 3, not_run: 4, skipped: 5 };
  var GATE_SEVERITY = { FAIL: 3, INCONCLUSIVE: 2, WARN: 1, OK: 0 };
  var CHART_ROWS = 30;
  var LONG_TEXT = 600;
  var BATCH_ROWS = 150;

  // -- building DOM ---------------------------------------------------------------------

  // Bidirectional controls (U+202E and friends) in run text: the value goes in a <bdi>, so
  // an override reorders that value only, never the rest of its line.
  var BIDI = /[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/;
  function textOf(value) {
    var text = String(value);
    if (!BIDI.test(text)) return document.createTextNode(text);
    var isolated = document.createElement("bdi");
    isolated.textContent = text;
    return isolated;
  }
  function fill(node, attrs, children) {
    Object.keys(attrs || {}).forEach(function (name) {
      var value = attrs[name];
      if (value === null || value === undefined || value === false) return;
      if (name === "text") { node.textContent = ""; node.appendChild(textOf(value)); }
      else node.setAttribute(name, String(value));
    });
    children.forEach(function add(child) {
      if (child === null || child === undefined || child === false) return;
      if (Array.isArray(child)) child.forEach(add);
      else node.appendChild(typeof child === "object" ? child : textOf(child));
    });
    return node;
  }
  function el(tag, attrs) { return fill(document.createElement(tag), attrs, [].slice.call(arguments, 2)); }
  function svg(tag, attrs) { return fill(document.createElementNS(SVGNS, tag), attrs, [].slice.call(arguments, 2)); }
  function titled(node, title) { node.appendChild(svg("title", { text: title })); return node; }

  // -- formatting -----------------------------------------------------------------------

  function isNum(v) { return typeof v === "number" && isFinite(v); }
  function pct(v, digits) { return isNum(v) ? (v * 100).toFixed(digits || 0) + "%" : "–"; }
  function signed(v, digits, unit) {
    if (!isNum(v)) return "–";
    var text = Math.abs(v).toLocaleString("en", { maximumFractionDigits: digits });
    return (v < 0 ? "−" : "+") + text + (unit || "");
  }
  function pp(v) {
    if (!isNum(v)) return "–";
    return Math.abs(v) < 0.005 ? "±0 pp" : signed(v * 100, 0, " pp");
  }
  function ms(v) {
    if (!isNum(v)) return "–";
    return v >= 10000 ? (v / 1000).toFixed(1) + " s" : Math.round(v).toLocaleString("en") + " ms";
  }
  function count(v) { return isNum(v) ? Math.round(v).toLocaleString("en") : "–"; }
  // USD as the terminal writes it: 4 decimals under a dollar; "unknown" when a model has no price.
  function usd(v, unknown) {
    if (unknown) return "unknown";
    if (!isNum(v)) return "–";
    return "$" + (Math.abs(v) < 1 ? v.toFixed(4) : v.toLocaleString("en", { minimumFractionDigits: 2, maximumFractionDigits: 2 }));
  }
  function shorten(text, size) { return text.length > size ? text.slice(0, size - 1) + "…" : text; }
  function badge(word, cls) { return el("span", { "class": "badge " + (cls || word), text: word }); }

  // -- small charts -----------------------------------------------------------------------

  function intervalBar(row) {
    var w = 100, h = 14, x = function (v) { return 2 + v * (w - 4); };
    var node = svg("svg", { width: w, height: h, viewBox: "0 0 " + w + " " + h, "class": "interval", role: "img" });
    node.appendChild(svg("rect", { x: 2, y: 6, width: w - 4, height: 2, fill: "#e6eaef" }));
    if (isNum(row.min)) node.appendChild(svg("line", { x1: x(row.min), x2: x(row.min), y1: 1, y2: 13, stroke: "#9a6700", "stroke-dasharray": "2 1" }));
    var base = row.change && row.change.baseline_pass_rate;
    if (isNum(base)) node.appendChild(svg("line", { x1: x(base), x2: x(base), y1: 2, y2: 12, stroke: "#8c959f", "stroke-width": 2 }));
    if (isNum(row.lo) && isNum(row.hi)) node.appendChild(svg("rect", { x: x(row.lo), y: 4, width: Math.max(1, x(row.hi) - x(row.lo)), height: 6, rx: 2, fill: "#b6d3f5" }));
    if (isNum(row.rate)) node.appendChild(svg("circle", { cx: x(row.rate), cy: 7, r: 3.5, fill: row.rate < 1 ? "#cf222e" : "#1a7f37" }));
    var words = "pass rate " + pct(row.rate) + ", 95% interval " + pct(row.lo) + " to " + pct(row.hi);
    if (isNum(base)) words += ", baseline " + pct(base);
    if (isNum(row.min)) words += ", minimum " + pct(row.min);
    return titled(node, words);
  }

  function sparkline(points, w, h) {
    var node = svg("svg", { width: w, height: h, viewBox: "0 0 " + w + " " + h, role: "img" });
    if (!points.length) return node;
    var x = function (i) { return points.length === 1 ? w / 2 : 3 + i * (w - 6) / (points.length - 1); };
    var y = function (v) { return h - 3 - v * (h - 6); };
    node.appendChild(svg("polyline", { points: points.map(function (p, i) { return x(i) + "," + y(p[1]); }).join(" "), fill: "none", stroke: "#0969da", "stroke-width": 1.5 }));
    points.forEach(function (p, i) {
      if (p[3]) node.appendChild(svg("circle", { cx: x(i), cy: y(p[1]), r: 3, fill: "#1f2328" }));
    });
    // One title for the whole line: a tooltip per point costs a node per point per row.
    return titled(node, points.map(function (p) { return (p[3] ? "this run " : p[0].slice(0, 10) + " ") + pct(p[1]); }).join(", "));
  }

  // -- the scenarios table --------------------------------------------------------------

  var SORTS = {
    id: function (r) { return r.id.toLowerCase(); },
    verdict: function (r) { return SEVERITY[r.verdict]; },
    passed: function (r) { return r.n ? r.passed / r.n : null; },
    rate: function (r) { return r.rate; },
    phk: function (r) { return r.phk ? r.phk[1] : null; },
    p95: function (r) { return r.p95; },
    tokens: function (r) { return r.tokens; },
    delta: function (r) { return r.change ? r.change.delta : null; }
  };
  var state = { sort: null, dir: 1, open: {}, groups: {} };
  var rowCache = {};
  var tbody = document.getElementById("scenario-rows");

  function gateSeverity(r) { return r.change ? (GATE_SEVERITY[r.change.verdict] || 0) : 0; }

  // Problems first: what a gate flagged, then failed scenarios, then the largest drops.
  function defaultOrder(a, b) {
    return gateSeverity(b) - gateSeverity(a) || SEVERITY[a.verdict] - SEVERITY[b.verdict] ||
      ((a.change && a.change.delta) || 0) - ((b.change && b.change.delta) || 0) || compareText(a.id, b.id);
  }
  function compareText(a, b) { return a < b ? -1 : a > b ? 1 : 0; }

  function sorted(rows) {
    if (!state.sort) return rows.slice().sort(defaultOrder);
    var key = SORTS[state.sort], dir = state.dir;
    return rows.slice().sort(function (a, b) {
      var x = key(a), y = key(b);
      if (x === null || x === undefined) return (y === null || y === undefined) ? compareText(a.id, b.id) : 1;
      if (y === null || y === undefined) return -1;  // unknown values last, in both directions
      return (x < y ? -1 : x > y ? 1 : 0) * dir || compareText(a.id, b.id);
    });
  }

  function caseCell(r) {
    return el("td", {}, el("span", { "class": "case-id", text: r.id }), " ",
      r.tags.map(function (t) { return el("span", { "class": "tag", text: t }); }),
      r.name && r.name !== r.id ? el("span", { "class": "case-name", text: r.name }) : null);
  }

  function changeCell(r) {
    var c = r.change, td = el("td", { "class": "num" });
    if (!c) return fill(td, { text: "–" }, []);
    if (c.movement === "new") return fill(td, {}, [badge("new", "skipped")]);
    var words = "baseline " + pct(c.baseline_pass_rate) + " → now " + pct(c.current_pass_rate);
    if (isNum(c.delta_low)) words += "; 95% interval " + pp(c.delta_low) + " to " + pp(c.delta_high);
    if (isNum(c.p95_ms_delta)) words += "; p95 " + signed(c.p95_ms_delta, 0, " ms");
    if (isNum(c.tokens_delta)) words += "; tokens " + signed(c.tokens_delta, 0);
    if (isNum(c.cost_delta)) words += "; cost per attempt " + (c.cost_delta < 0 ? "−" : "+") + usd(Math.abs(c.cost_delta));
    if (c.verdict) words += "; gate verdict " + c.verdict;
    return fill(td, {}, [el("span", { "class": "delta v-" + (c.verdict || "none"), title: words, text: pp(c.delta) })]);
  }

  function buildRow(r) {
    var tr = el("tr", { "class": "case-row", "data-case-id": r.id, tabindex: 0, "aria-expanded": "false" },
      caseCell(r),
      el("td", {}, badge(r.verdict), r.infra ? el("small", { text: " " + r.infra + " infra" }) : null,
        r.reruns ? el("small", { text: " flaky: " + r.reruns + " rerun(s)" }) : null,
        r.adaptive ? el("small", { "class": "adaptive", text: " adaptive: " + r.adaptive }) : null,
        r.judge_skipped ? el("small", { "class": "judge-skipped", text: " judge skipped" }) : null),
      el("td", { "class": "num", text: r.passed + "/" + r.n }),
      el("td", {}, el("div", { "class": "rate-cell" }, intervalBar(r),
        el("span", { text: pct(r.rate) + (isNum(r.lo) ? " [" + pct(r.lo) + "–" + pct(r.hi) + "]" : "") }))),
      el("td", { "class": "num" }, r.phk ? [r.phk[1].toFixed(2), el("small", { text: " k=" + r.phk[0] })] : "–"),
      el("td", { "class": "num", text: ms(r.p95) }),
      el("td", { "class": "num", text: count(r.tokens) }),
      changeCell(r),
      el("td", {}, sparkline(r.trend, 64, 16)));
    var toggle = function () { toggleDetail(r); };
    tr.addEventListener("click", toggle);
    tr.addEventListener("keydown", function (e) { if (e.key === "Enter" || e.key === " ") { e.preventDefault(); toggle(); } });
    return tr;
  }

  function rowOf(r) {
    if (!rowCache[r.i]) rowCache[r.i] = { row: buildRow(r), detail: null };
    return rowCache[r.i];
  }

  function toggleDetail(r) {
    state.open[r.i] = !state.open[r.i];
    var cached = rowOf(r);
    cached.row.classList.toggle("open", state.open[r.i]);
    cached.row.setAttribute("aria-expanded", String(state.open[r.i]));
    if (state.open[r.i]) {
      cached.detail = cached.detail || buildDetail(r);
      cached.row.after(cached.detail);
    } else if (cached.detail) {
      cached.detail.remove();
    }
  }

  // A diverged attempt says where in one line; the field, the diff and how to re-record unfold.
  function why(a) { return a.divergence ? divergenceDetails(a, false) : a.reason || ""; }
  function firstLine(text) { var end = text.indexOf("\n"); return end < 0 ? text : text.slice(0, end); }
  function afterFirstLine(text) { var end = text.indexOf("\n"); return end < 0 ? "" : text.slice(end + 1); }
  function divergenceDetails(a, open) {
    return el("details", { "class": "divergence", open: open }, el("summary", { text: firstLine(a.divergence) }),
      el("pre", { text: afterFirstLine(a.divergence) }));
  }

  function buildDetail(r) {
    var head = el("tr", {}, ["#", "outcome", "status", "latency", "tokens", "cost", "turns", "LLM calls", "tool calls", "failed assertions", "why", ""]
      .map(function (h) { return el("th", { text: h }); }));
    var body = r.attempts.map(function (a) {
      var open = a.tl ? el("button", { type: "button", "class": "linkish open-attempt", "data-repeat": a.repeat, text: "timeline →" })
        : el("span", { "class": "muted", title: DATA.timeline_policy, text: "not embedded" });
      if (a.tl) open.addEventListener("click", function (e) { e.stopPropagation(); openAttempt(r, a); });
      return el("tr", {}, el("td", { text: a.repeat }), el("td", {}, badge(a.outcome), a.infra ? el("small", { text: " infra" }) : null),
        el("td", { text: a.status || "–" }), el("td", { text: ms(a.latency) }), el("td", { text: count(a.tokens) }),
        el("td", { title: [a.cost_split, a.cost_unpriced.length ? "no price for " + a.cost_unpriced.join(", ") : ""].filter(Boolean).join("; "),
          text: usd(a.cost_split && isNum(a.total_cost) ? a.total_cost : a.cost, a.cost_unpriced.length) }),
        el("td", { text: a.turns }), el("td", { text: a.llm }), el("td", { text: a.tools }),
        el("td", { "class": a.failed ? "bad" : "", text: a.failed }), el("td", { "class": "reason" }, why(a)), el("td", {}, open));
    });
    var facts = el("p", { "class": "muted" }, "directory ", el("code", { text: r.dir || "?" }),
      isNum(r.min) ? " · minimum pass rate " + pct(r.min) : null,
      isNum(r.p50) ? " · p50 latency " + ms(r.p50) : null,
      isNum(r.cost) || r.cost_unknown ? " · cost per attempt " + usd(r.cost, r.cost_unknown) : null);
    return el("tr", { "class": "detail-row" }, el("td", { "class": "detail", colspan: 9 }, facts,
      el("table", { "class": "attempts" }, el("thead", {}, head), el("tbody", {}, body))));
  }

  // -- filters ------------------------------------------------------------------------------

  var filters = {
    text: document.getElementById("f-text"), tag: document.getElementById("f-tag"),
    status: document.getElementById("f-status"), change: document.getElementById("f-change")
  };

  function fillTagOptions() {
    var tags = {};
    CASES.forEach(function (r) { r.tags.forEach(function (t) { tags[t] = true; }); });
    Object.keys(tags).sort().forEach(function (t) { filters.tag.appendChild(el("option", { value: t, text: t })); });
  }

  function matches(r) {
    var text = filters.text.value.trim().toLowerCase(), status = filters.status.value, change = filters.change.value;
    if (text && r.id.toLowerCase().indexOf(text) < 0 && r.name.toLowerCase().indexOf(text) < 0) return false;
    if (filters.tag.value && r.tags.indexOf(filters.tag.value) < 0) return false;
    if (status === "problem" && (r.verdict === "passed" || r.verdict === "skipped" || r.verdict === "not_run")) return false;
    if (status && status !== "problem" && r.verdict !== status) return false;
    if (change === "flagged") return gateSeverity(r) > 0;
    if (change) return !!r.change && r.change.movement === change;
    return true;
  }

  // Rows are put on the page a batch at a time (more as the table scrolls), so a suite of
  // thousands of scenarios opens as fast as one of a few hundred.
  // A dataset case's rows (report.json's `dataset`) sit under one line of their case, where
  // its worst row would be, and unfold from it (folded at first); `visible` stays the flat rows.
  var visible = [], items = [], shown = 0;

  function grouped(rows) {
    var out = [], groups = {};
    rows.forEach(function (r) {
      var base = r.dataset;
      if (base === null || base === undefined) { out.push({ row: r }); return; }
      if (!groups[base]) { groups[base] = { group: base, rows: [] }; out.push(groups[base]); }
      groups[base].rows.push(r);
    });
    return out;
  }

  function groupRow(g) {
    var counts = {};
    g.rows.forEach(function (r) { counts[r.verdict] = (counts[r.verdict] || 0) + 1; });
    var open = !!state.groups[g.group];
    var words = Object.keys(counts).map(function (v) { return counts[v] + " " + v; }).join(", ");
    var tr = el("tr", { "class": "dataset-row", "data-dataset": g.group, tabindex: 0, "aria-expanded": String(open) },
      el("td", { colspan: 9 }, el("span", { "class": "case-id", text: g.group }),
        el("span", { "class": "muted", text: " dataset, " + g.rows.length + " row(s): " + words })));
    var toggle = function () { state.groups[g.group] = !open; update(); };
    tr.addEventListener("click", toggle);
    tr.addEventListener("keydown", function (e) { if (e.key === "Enter" || e.key === " ") { e.preventDefault(); toggle(); } });
    return tr;
  }

  function itemOf(r) {
    for (var i = 0; i < items.length; i++) {
      if (items[i].row === r || (items[i].rows && items[i].rows.indexOf(r) >= 0)) return i;
    }
    return -1;
  }
  var moreButton = el("button", { type: "button", "class": "linkish" });
  var moreRow = el("tr", { id: "more-rows" }, el("td", { colspan: 9 }, moreButton));
  moreButton.addEventListener("click", function () { showMore(); });

  function update() {
    visible = sorted(CASES.filter(matches));
    items = grouped(visible);
    shown = 0;
    tbody.replaceChildren();
    showMore();
    document.getElementById("f-count").textContent = "showing " + visible.length + " of " + CASES.length;
    scheduleCharts();
  }

  function showMore() {
    var nodes = [];
    function add(r) {
      var cached = rowOf(r);
      nodes.push(cached.row);
      if (state.open[r.i] && cached.detail) nodes.push(cached.detail);
    }
    items.slice(shown, shown + BATCH_ROWS).forEach(function (item) {
      if (!item.group) return add(item.row);
      nodes.push(groupRow(item));
      if (state.groups[item.group]) item.rows.forEach(add);
    });
    shown = Math.min(items.length, shown + BATCH_ROWS);
    moreRow.remove();
    tbody.append.apply(tbody, nodes);
    if (shown < items.length) {
      moreButton.textContent = "show " + Math.min(BATCH_ROWS, items.length - shown) + " more (" + (items.length - shown) + " not shown yet)";
      tbody.appendChild(moreRow);
    }
  }

  function watchMoreRow() {
    if (!window.IntersectionObserver) return;
    var observer = new IntersectionObserver(function (entries) {
      if (entries.some(function (e) { return e.isIntersecting; })) showMore();
    }, { root: document.querySelector(".table-scroll"), rootMargin: "400px" });
    observer.observe(moreRow);
  }

  function onSortClick(th) {
    var key = th.getAttribute("data-sort");
    state.dir = state.sort === key ? -state.dir : (key === "id" || key === "verdict" ? 1 : -1);
    state.sort = key;
    document.querySelectorAll("#scenario-table th[data-sort]").forEach(function (other) { other.removeAttribute("aria-sort"); });
    th.setAttribute("aria-sort", state.dir > 0 ? "ascending" : "descending");
    update();
  }

  function jumpTo(caseId) {
    var r = CASES.filter(function (c) { return c.id === caseId; })[0];
    if (!r) return;
    if (!matches(r)) { filters.text.value = ""; filters.tag.value = ""; filters.status.value = ""; filters.change.value = ""; update(); }
    if (r.dataset !== null && r.dataset !== undefined && !state.groups[r.dataset]) { state.groups[r.dataset] = true; update(); }
    while (shown <= itemOf(r)) showMore();
    if (!state.open[r.i]) toggleDetail(r);
    rowOf(r).row.scrollIntoView({ block: "center" });
    rowOf(r).row.focus();
  }

  // -- charts -------------------------------------------------------------------------------

  var chartsPending = false;
  function scheduleCharts() {
    if (chartsPending) return;
    chartsPending = true;
    requestAnimationFrame(function () { chartsPending = false; drawCharts(); });
  }

  function drawCharts() {
    var rows = visible.slice(0, CHART_ROWS);
    document.getElementById("chart-latency").replaceChildren(latencyChart(rows));
    document.getElementById("chart-baseline").replaceChildren(baselineChart(rows));
    document.getElementById("chart-trend").replaceChildren(trendChart(rows));
  }

  function empty(words) { return el("p", { "class": "muted", text: words }); }

  function rowLabel(node, r, y) { node.appendChild(titled(svg("text", { x: 0, y: y + 4, text: shorten(r.id, 26) }), r.id)); }

  function latencyChart(rows) {
    rows = rows.filter(function (r) { return r.attempts.some(function (a) { return isNum(a.latency); }); });
    if (!rows.length) return empty("No latencies recorded for these scenarios.");
    var max = 0;
    rows.forEach(function (r) { r.attempts.forEach(function (a) { if (isNum(a.latency)) max = Math.max(max, a.latency); }); });
    var w = 560, left = 150, rowH = 14, h = rows.length * rowH + 22, x = function (v) { return left + (v / (max || 1)) * (w - left - 10); };
    var node = svg("svg", { viewBox: "0 0 " + w + " " + h, width: "100%", role: "img" });
    [0, 0.5, 1].forEach(function (f) {
      node.appendChild(svg("line", { x1: x(max * f), x2: x(max * f), y1: 0, y2: h - 16, stroke: "#eaeef2" }));
      node.appendChild(svg("text", { x: x(max * f), y: h - 4, "text-anchor": "middle", text: ms(max * f) }));
    });
    rows.forEach(function (r, i) {
      var y = i * rowH + 8;
      rowLabel(node, r, y);
      r.attempts.forEach(function (a) {
        if (!isNum(a.latency)) return;
        var bad = a.outcome !== "passed";
        node.appendChild(titled(svg("circle", { cx: x(a.latency), cy: y, r: 3, fill: bad ? "#cf222e" : "#0969da", "fill-opacity": 0.7 }),
          r.id + " attempt " + a.repeat + ": " + ms(a.latency) + " (" + a.outcome + ")"));
      });
      [[r.p50, "p50"], [r.p95, "p95"]].forEach(function (q) {
        if (isNum(q[0])) node.appendChild(titled(svg("line", { x1: x(q[0]), x2: x(q[0]), y1: y - 5, y2: y + 5, stroke: "#1f2328", "stroke-width": q[1] === "p95" ? 2 : 1 }), q[1] + " " + ms(q[0])));
      });
    });
    return node;
  }

  function baselineChart(rows) {
    if (!DATA.gate) return empty("This run was not compared with a baseline.");
    rows = rows.filter(function (r) { return r.change && isNum(r.change.baseline_pass_rate) && isNum(r.change.current_pass_rate); });
    if (!rows.length) return empty("None of these scenarios has a baseline pass rate.");
    var w = 560, left = 150, rowH = 14, h = rows.length * rowH + 22, x = function (v) { return left + v * (w - left - 10); };
    var node = svg("svg", { viewBox: "0 0 " + w + " " + h, width: "100%", role: "img" });
    [0, 0.5, 1].forEach(function (f) {
      node.appendChild(svg("line", { x1: x(f), x2: x(f), y1: 0, y2: h - 16, stroke: "#eaeef2" }));
      node.appendChild(svg("text", { x: x(f), y: h - 4, "text-anchor": "middle", text: pct(f) }));
    });
    rows.forEach(function (r, i) {
      var y = i * rowH + 8, c = r.change, colour = c.verdict === "FAIL" ? "#cf222e" : c.verdict === "INCONCLUSIVE" || c.verdict === "WARN" ? "#9a6700" : "#57606a";
      rowLabel(node, r, y);
      node.appendChild(svg("line", { x1: x(c.baseline_pass_rate), x2: x(c.current_pass_rate), y1: y, y2: y, stroke: colour, "stroke-width": 2 }));
      node.appendChild(svg("circle", { cx: x(c.baseline_pass_rate), cy: y, r: 3.5, fill: "#fff", stroke: colour }));
      node.appendChild(titled(svg("circle", { cx: x(c.current_pass_rate), cy: y, r: 3.5, fill: colour }),
        r.id + ": baseline " + pct(c.baseline_pass_rate) + " → now " + pct(c.current_pass_rate) + " (" + pp(c.delta) + (c.verdict ? ", " + c.verdict : "") + ")"));
    });
    return node;
  }

  function trendChart(rows) {
    if (!DATA.has_history) return empty("No run history was given, so there is no trend to draw.");
    rows = rows.filter(function (r) { return r.trend.length; });
    if (!rows.length) return empty("None of these scenarios has past runs in the history.");
    return el("div", { "class": "small-multiples" }, rows.map(function (r) {
      var last = r.trend[r.trend.length - 1];
      return el("div", {}, el("div", { "class": "sm-title", title: r.id, text: r.id + " · " + r.trend.length + (r.trend.length === 1 ? " run" : " runs") + " · last " + pct(last[1]) }),
        sparkline(r.trend, 180, 40));
    }));
  }

  // -- one attempt ------------------------------------------------------------------------

  var view = document.getElementById("attempt-view"), viewBody = document.getElementById("attempt-body");
  var tabs = { timeline: document.getElementById("tab-timeline"), diff: document.getElementById("tab-diff") };
  var blocks = {}, current = null, openedHere = false;

  // The open attempt lives in the URL's fragment, so Back closes it and a link can share it.
  function openAttempt(r, a) {
    openedHere = true;
    location.hash = "attempt-" + r.i + "-" + a.repeat;
  }

  // -- what the page carries compressed (html_pack.py) -----------------------------------
  // Each element is a JSON string of base64. The run's data is gzip. A case's timelines are
  // deflate against a dictionary the page shares (the start of the first case's timelines):
  // DecompressionStream takes no preset dictionary, so the dictionary goes first as a stored
  // deflate block of a zlib stream, and is cut from what comes out.

  function bytesOf(id) {
    var packed = atob(JSON.parse(document.getElementById(id).textContent));
    var bytes = new Uint8Array(packed.length);
    for (var i = 0; i < packed.length; i++) bytes[i] = packed.charCodeAt(i);
    return bytes;
  }

  function inflate(parts, format) {
    var stream = new Blob(parts).stream().pipeThrough(new DecompressionStream(format));
    return new Response(stream).arrayBuffer().then(function (buffer) { return new Uint8Array(buffer); });
  }

  function jsonOf(bytes) { return JSON.parse(new TextDecoder().decode(bytes)); }

  var dictionary = null;
  function unpackBlock(id) {
    dictionary = dictionary || inflate([bytesOf("nodeval-dict")], "gzip");
    return dictionary.then(function (dict) {
      var n = dict.length, stored = new Uint8Array([0x78, 0x01, 0, n & 255, n >> 8, ~n & 255, (~n >> 8) & 255]);
      return inflate([stored, dict, bytesOf(id)], "deflate").then(function (bytes) { return jsonOf(bytes.subarray(n)); });
    });
  }

  // A long string held by several views of a case is stored once: "\u0001" + its index
  // (a string that itself starts with "\u0001" has a second one). Replaced in place, so a
  // "__proto__" key from the run stays a key.
  function withStrings(value, strings) {
    if (typeof value === "string") {
      if (value.charCodeAt(0) !== 1) return value;
      return value.charCodeAt(1) === 1 ? value.slice(1) : strings[Number(value.slice(1))];
    }
    if (value && typeof value === "object") {
      Object.keys(value).forEach(function (k) { value[k] = withStrings(value[k], strings); });
    }
    return value;
  }

  // A case's timelines are inflated the first time one of its attempts is opened. Views
  // shared by several attempts are stored once, by index.
  function blockOf(id) {
    if (!blocks[id]) {
      blocks[id] = unpackBlock(id).then(function (block) {
        block.views = block.views.map(function (v) { return withStrings(v, block.strings); });
        return block;
      });
    }
    return blocks[id];
  }

  function timelineOf(a) {
    return blockOf(a.tl).then(function (block) {
      var t = block.attempts[a.tn], view = function (i) { return block.views[i]; };
      var diff = t.diff && { rows: t.diff.rows, same: t.diff.same, total: t.diff.total, golden: {} };
      if (diff) Object.keys(t.diff.golden).forEach(function (g) { diff.golden[g] = view(t.diff.golden[g]); });
      return { events: t.events.map(view), assertions: t.assertions, note: t.note, diff: diff, golden_note: t.golden_note };
    });
  }

  // A request's whole body: the first request's patch, then every later one's, applied in
  // order up to this request. Objects without a prototype, so a "__proto__" key stays a key.
  function fullRequest(events, upTo) {
    var body = null;
    for (var i = 0; i <= upTo; i++) {
      var ev = events[i];
      if (ev.type !== "llm.request") continue;
      if (!ev.req) return undefined;
      body = applyPatch(body, ev.req);
    }
    return body;
  }

  function applyPatch(previous, patch) {
    if (Object.prototype.hasOwnProperty.call(patch, "whole")) return patch.whole;
    var base = previous && typeof previous === "object" && !Array.isArray(previous) ? previous : {};
    var removed = patch.del || [], set = patch.set || {}, append = patch.append || {}, body = Object.create(null);
    Object.keys(base).forEach(function (k) { if (removed.indexOf(k) < 0) body[k] = base[k]; });
    Object.keys(set).forEach(function (k) { body[k] = set[k]; });
    Object.keys(append).forEach(function (k) { body[k] = base[k].concat(append[k]); });
    if (!patch.keys) return body;
    var ordered = Object.create(null);
    patch.keys.forEach(function (k) { ordered[k] = body[k]; });
    return ordered;
  }

  function route() {
    var m = /^#attempt-(\d+)-(\d+)$/.exec(location.hash);
    var r = m && CASES[Number(m[1])];
    var a = r && r.attempts.filter(function (x) { return x.repeat === Number(m[2]); })[0];
    if (!a || !a.tl) { showRun(); return; }
    current = { r: r, a: a, tab: "timeline" };
    document.getElementById("attempt-title").replaceChildren(r.id + " · attempt " + a.repeat + " ", badge(a.outcome));
    if (view.hidden) {
      runScroll = window.scrollY;
      runParts.forEach(function (part) { part.hidden = true; });
      view.hidden = false;
    }
    showTab("timeline");
    document.getElementById("attempt-close").focus();
  }

  // The attempt replaces the run on screen (rather than covering it), so the page scrolls
  // as usual; the run's scroll position comes back when the attempt closes.
  var runParts = [document.getElementById("banner"), document.querySelector("main"), document.querySelector("footer")];
  var runScroll = 0;
  function showRun() {
    current = null;
    openedHere = false;
    if (view.hidden) return;
    view.hidden = true;
    viewBody.replaceChildren();
    runParts.forEach(function (part) { part.hidden = false; });
    window.scrollTo(0, runScroll);
  }

  function closeAttempt() {
    if (openedHere) history.back();
    else location.hash = "scenarios";
  }

  function showTab(name) {
    var shown = current;
    shown.tab = name;
    Object.keys(tabs).forEach(function (k) { tabs[k].setAttribute("aria-selected", String(k === name)); });
    viewBody.removeAttribute("data-shown");
    timelineOf(shown.a).then(function (t) {
      if (current !== shown || shown.tab !== name) return;  // closed or switched meanwhile
      viewBody.replaceChildren(name === "timeline" ? timelineView(shown.a, t) : diffView(t));
      viewBody.setAttribute("data-shown", name);
      window.scrollTo(0, 0);
    }, function (error) {
      viewBody.replaceChildren(el("p", { "class": "notice bad", text: "This timeline could not be read: " + error }));
    });
  }

  function longText(value) {
    if (value.length <= LONG_TEXT) return el("pre", { text: value });
    var pre = el("pre", { text: value.slice(0, LONG_TEXT) + " …" });
    var more = el("button", { type: "button", "class": "linkish", text: "show all " + value.length.toLocaleString("en") + " characters" });
    more.addEventListener("click", function () { pre.textContent = ""; pre.appendChild(textOf(value)); more.remove(); });
    return el("div", {}, pre, more);
  }

  // `events` and `index` (the attempt's views and this one's place) let a request show its whole body.
  // `changes` ([path, recorded, now], from the golden diff) marks the fields that changed.
  function eventCard(ev, events, index, changes) {
    var kind = String(ev.type).split(".")[0];
    var minor = ev.type === "tool.register" || ev.type === "agent.turn.start" || ev.type === "agent.turn.end" || ev.type === "session.start";
    var card = el("div", { "class": "card k-" + kind + (ev.bad ? " bad" : "") + (minor ? " minor" : "") },
      el("div", { "class": "ev-head" }, el("span", { "class": "ev-type", text: ev.type }), el("span", { "class": "ev-title", text: ev.title })));
    // The patch's rows, less any the card already has (the first request sets the model).
    var fields = ev.req ? ev.fields.concat(patchFields(ev.req, ev.at).filter(function (f) {
      return !ev.fields.some(function (g) { return g[0] === f[0] && g[1] === f[1]; });
    })) : ev.fields;
    if (!minor) fields.forEach(function (f) {
      var changed = changes && fieldChanged(f[0], changes);
      card.appendChild(el("div", { "class": "field" + (changed ? " changed-field" : ""), title: changed ? "changed from the golden journal" : null },
        el("span", { "class": "label", text: f[0] }), longText(f[1])));
    });
    if (ev.req && events) card.appendChild(fullRequestButton(events, index));
    return card;
  }

  // What a request changed, from its patch: the messages appended, the keys set or removed.
  // `at` gives each appended list's length before, so its new items carry their index.
  function patchFields(patch, at) {
    var fields = [], set = patch.set || {}, append = patch.append || {};
    if (Object.prototype.hasOwnProperty.call(patch, "whole")) return [["body", asText(patch.whole)]];
    Object.keys(append).forEach(function (k) {
      var from = at && isNum(at[k]) ? at[k] : null;
      append[k].forEach(function (m, i) { fields.push(["+ " + k + (from === null ? "" : "[" + (from + i) + "]"), messageText(m)]); });
    });
    Object.keys(set).forEach(function (k) {
      if (Array.isArray(set[k]) && (k === "messages" || k === "input")) set[k].forEach(function (m, i) { fields.push([k + "[" + i + "]", messageText(m)]); });
      else fields.push([k, asText(set[k])]);
    });
    if (patch.del) fields.push(["removed", patch.del.join(", ")]);
    return fields;
  }

  function asText(value) { return typeof value === "string" ? value : JSON.stringify(value, null, 2); }

  function messageText(m) {
    if (!m || typeof m !== "object" || Array.isArray(m)) return asText(m);
    var content = m.content !== undefined ? m.content : m.text;
    if (typeof content === "string") return (m.role || "?") + ": " + content;
    return asText(content === undefined ? m : { role: m.role || "?", content: content });
  }

  function fullRequestButton(events, index) {
    var button = el("button", { type: "button", "class": "linkish show-request", text: "show the full request" });
    button.addEventListener("click", function () {
      var body = fullRequest(events, index);
      var text = body === undefined ? "An earlier request of this attempt is not embedded, so this one cannot be rebuilt."
        : JSON.stringify(body, null, 2);
      button.replaceWith(el("div", { "class": "field" }, el("span", { "class": "label", text: "full request" }),
        el("pre", { "class": "full-request", text: text })));
    });
    return button;
  }

  function assertionNote(a) {
    var ok = a.status === "passed";
    return el("div", { "class": "note " + a.status }, (ok ? "✓ " : a.status === "failed" ? "✗ " : "– ") + a.description,
      !ok && a.message ? el("pre", { text: a.message }) : null);
  }

  function timelineView(a, t) {
    var bySeq = {}, rowsBySeq = {}, seen = {};
    t.events.forEach(function (ev) { seen[ev.seq] = true; });
    t.assertions.forEach(function (x) { x.seqs.forEach(function (s) { (bySeq[s] = bySeq[s] || []).push(x); }); });
    // A failure that points at no event shown here is explained at the top instead.
    function placed(x) { return x.seqs.some(function (s) { return seen[s]; }); }
    var facts = el("div", { "class": "attempt-facts" }, el("span", {}, "outcome ", badge(a.outcome)),
      el("span", { text: "status " + (a.status || "–") }), el("span", { text: "latency " + ms(a.latency) }),
      el("span", { text: "tokens " + count(a.tokens) }), el("span", { text: "turns " + a.turns }),
      el("span", { text: a.llm + " LLM call(s), " + a.tools + " tool call(s)" }),
      a.live_from ? el("span", { "class": "live-from", title: "--nodeval-from-turn: the turns before it were replayed from the case's journal",
        text: "live from user turn " + a.live_from }) : null,
      el("span", { "class": "muted" }, "journal ", el("code", { text: a.journal || "–" })));
    var list = el("ul", { "class": "assertion-list" }, t.assertions.map(function (x) {
      var cls = x.status === "passed" ? "ok" : x.status === "failed" ? "bad" : "skip";
      return el("li", { "class": cls }, (x.status === "passed" ? "✓ " : x.status === "failed" ? "✗ " : "– ") + x.description + " ",
        x.seqs.map(function (s) {
          var b = el("button", { type: "button", "class": "linkish", text: "seq " + s });
          b.addEventListener("click", function () { flash(rowsBySeq[s]); });
          return [b, " "];
        }),
        x.status === "failed" && x.message && !placed(x) ? el("pre", { text: x.message }) : null,
        x.status === "skipped" && x.message && !placed(x) ? el("span", { "class": "skip-reason", text: "(" + x.message + ")" }) : null);
    }));
    // A divergence at an event shown here is marked there, its diff beside it; the header
    // unfolds the whole message when there is no such event.
    var marked = !!a.divergence && isNum(a.dseq) && !!seen[a.dseq];
    var jump = marked ? el("button", { type: "button", "class": "linkish", text: "diverged at seq " + a.dseq }) : null;
    if (jump) jump.addEventListener("click", function () { flash(rowsBySeq[a.dseq]); });
    var headline = a.divergence ? el("div", { "class": "bad reason" }, divergenceDetails(a, !marked), jump)
      : a.reason ? el("p", { "class": "bad reason", text: a.reason }) : null;
    var out = el("div", {}, facts, headline,
      t.note ? el("p", { "class": "notice", text: t.note }) : null,
      t.assertions.length ? el("h3", { text: "Assertions" }) : null, list, el("h3", { text: "Timeline" }));
    if (!t.events.length) out.appendChild(empty("The journal has no events."));
    var turn = null;
    t.events.forEach(function (ev, index) {
      if (ev.turn !== turn && ev.turn !== null) { turn = ev.turn; out.appendChild(el("div", { "class": "turn", text: turn ? "Turn " + turn : "Start" })); }
      var notes = (bySeq[ev.seq] || []).map(assertionNote);
      var diverged = marked && ev.seq === a.dseq;
      if (diverged) notes.unshift(el("div", { "class": "note failed divergence-note" }, "✗ The replay diverged here from the golden journal",
        el("pre", { text: afterFirstLine(a.divergence) })));
      var row = el("div", { "class": "ev" + (diverged ? " diverged" : ""), "data-seq": ev.seq }, el("div", { "class": "seq", text: ev.seq === null ? "" : "#" + ev.seq }),
        eventCard(ev, t.events, index), el("div", { "class": "notes" }, notes));
      if (ev.seq !== null) rowsBySeq[ev.seq] = row;
      out.appendChild(row);
    });
    return out;
  }

  function flash(row) {
    if (!row) return;
    row.scrollIntoView({ block: "center" });
    row.classList.add("flash");
    setTimeout(function () { row.classList.remove("flash"); }, 1500);
  }

  // `changes` and `side` (1: the recorded value, 2: the observed one) name what changed.
  function diffCell(ev, full, events, index, changes, side) {
    if (!ev) return el("td", { "class": "muted", text: "—" });
    var list = changes && changes.length ? el("div", { "class": "changes" }, changes.map(function (c) {
      return el("div", { "class": "change" }, el("span", { "class": "label", text: c[0] }), el("code", { text: c[side] }));
    })) : null;
    return el("td", {}, list, full ? eventCard(ev, events, index, changes) : el("div", { "class": "ev-head" }, el("span", { "class": "ev-type", text: "#" + ev.seq + " " + ev.type }),
      el("span", { text: ev.title })));
  }

  // Whether a card's field shows a changed path: "system" for body.system, "messages[0]" and
  // "+ messages" for body.messages[0].content, "arguments.command" for args.command.
  function fieldChanged(label, changes) {
    var name = String(label).replace(/^\+ /, "");
    return changes.some(function (c) {
      var path = c[0].replace(/^body\./, "").replace(/^args(?=[.[]|$)/, "arguments");
      return path === name || path.indexOf(name + ".") === 0 || path.indexOf(name + "[") === 0;
    });
  }

  function diffView(t) {
    if (!t.diff) return el("p", { "class": "notice", text: t.golden_note || "There are no observed events to compare with the golden journal." });
    var d = t.diff, body = el("tbody", {});
    var summary = el("p", {}, d.same + " of " + d.total + " events match the golden journal (timings and session ids are ignored).",
      t.golden_note ? el("span", { "class": "muted", text: " " + t.golden_note }) : null);
    var run = [];
    function flushSame() {
      if (run.length > 5) {
        run.slice(0, 2).forEach(addRow);
        var fold = el("tr", { "class": "fold" }, el("td", { colspan: 2 }));
        var hidden = run.slice(2, -2), button = el("button", { type: "button", "class": "linkish", text: "… " + hidden.length + " identical events (show)" });
        button.addEventListener("click", function () { hidden.forEach(function (row) { fold.before(diffRow(row)); }); fold.remove(); });
        fold.firstChild.appendChild(button);
        body.appendChild(fold);
        run.slice(-2).forEach(addRow);
      } else run.forEach(addRow);
      run = [];
    }
    function diffRow(row) {
      var g = row[0], o = row[1], status = row[2], observed = o === null ? null : t.events[o];
      var golden = g === null ? null : status === "same" ? observed : d.golden[String(g)];
      var full = status !== "same", changes = row[3];
      return el("tr", { "class": status, title: status }, diffCell(golden, full, null, null, changes, 1),
        diffCell(observed, full, t.events, o, changes, 2));
    }
    function addRow(row) { body.appendChild(diffRow(row)); }
    d.rows.forEach(function (row) { if (row[2] === "same") run.push(row); else { flushSame(); addRow(row); } });
    flushSame();
    return el("div", {}, summary, el("table", { "class": "diff" },
      el("thead", {}, el("tr", {}, el("th", { text: "Golden journal (recorded)" }), el("th", { text: "Observed (this attempt)" }))), body));
  }

  // -- wiring -------------------------------------------------------------------------------

  function start(data) {
    DATA = data;
    CASES = data.cases;

    document.querySelectorAll("#scenario-table th[data-sort]").forEach(function (th) {
      th.setAttribute("tabindex", "0");
      th.addEventListener("click", function () { onSortClick(th); });
      th.addEventListener("keydown", function (e) { if (e.key === "Enter" || e.key === " ") { e.preventDefault(); onSortClick(th); } });
    });
    ["text", "tag", "status", "change"].forEach(function (k) { filters[k].addEventListener("input", update); });
    document.querySelectorAll("button.jump").forEach(function (b) {
      b.addEventListener("click", function () { jumpTo(b.getAttribute("data-case-id")); });
    });
    document.getElementById("attempt-close").addEventListener("click", closeAttempt);
    tabs.timeline.addEventListener("click", function () { showTab("timeline"); });
    tabs.diff.addEventListener("click", function () { showTab("diff"); });
    document.addEventListener("keydown", function (e) { if (e.key === "Escape" && !view.hidden) closeAttempt(); });
    window.addEventListener("hashchange", route);
    document.getElementById("timeline-policy").textContent = "Attempt timelines: " + DATA.timeline_policy + ".";

    fillTagOptions();
    update();
    watchMoreRow();
    route();
    document.documentElement.setAttribute("data-ready", "1");
    performance.mark("nodeval:ready");
  }

  inflate([bytesOf("nodeval-data")], "gzip").then(jsonOf).then(start);
})();
