/* pyscope report: reads the recording embedded in #pyscope-data (written by
   src/output/html_report.c, format in docs/html.md) and draws the header, the
   per-thread GIL timeline, the flame graph and the summary tables. The flame
   graph of the whole recording comes from the exact sample counts; the flame
   graph of a selected time range is computed here from the timeline's bins.
   No network, no libraries: plain DOM and canvas. */
(function () {
  "use strict";

  var started = (window.performance && performance.now) ? performance.now() : 0;

  /* A page that fails says so on the page too, not only in the console. */
  window.addEventListener("error", function (ev) {
    var p = document.getElementById("load-error");
    if (p) {
      p.hidden = false;
      p.textContent = "This report could not be shown: " + (ev.message || "error");
    }
    document.documentElement.setAttribute("data-error", String(ev.message || "error"));
  });

  /* Timeline categories: the four GIL states, unknown, and GC (a thread that
     holds the GIL and runs the collector). Colours match report.css. */
  var CAT_HOLD = 0, CAT_WAIT = 1, CAT_RUN = 2, CAT_IDLE = 3, CAT_UNKNOWN = 4, CAT_GC = 5;
  var N_CATS = 6;
  var CAT_LABELS = ["holding the GIL", "waiting for the GIL", "running without the GIL",
                    "idle", "unknown", "GC"];
  var CAT_SHORT = ["holding", "waiting", "running", "idle", "unknown", "GC"];
  var CAT_COLORS = ["#2e9e44", "#d9412b", "#3a78d4", "#c4c8ce", "#9a84c9", "#f2a100"];
  /* Top to bottom inside a timeline row. */
  var CAT_STACK_ORDER = [CAT_GC, CAT_HOLD, CAT_WAIT, CAT_RUN, CAT_UNKNOWN, CAT_IDLE];
  var STATE_NAMES = ["holding_gil", "waiting_gil", "running", "idle", "unknown"];
  var UNITS_PER_BIN = 1000;
  var EMPTY_RGB = [246, 247, 249];

  var $ = function (id) { return document.getElementById(id); };

  function el(tag, attrs, text) {
    var e = document.createElement(tag);
    if (attrs) for (var k in attrs) if (Object.prototype.hasOwnProperty.call(attrs, k)) e.setAttribute(k, attrs[k]);
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }

  function hexRgb(hex) {
    return [parseInt(hex.slice(1, 3), 16), parseInt(hex.slice(3, 5), 16), parseInt(hex.slice(5, 7), 16)];
  }
  var CAT_RGB = CAT_COLORS.map(hexRgb);

  function fmtInt(n) {
    return Math.round(n).toString().replace(/\B(?=(\d{3})+(?!\d))/g, ",");
  }

  function fmtPct(x) {
    if (!isFinite(x)) return "0%";
    return (x >= 10 || x === 0 ? x.toFixed(1) : x.toFixed(2)) + "%";
  }

  function fmtSeconds(s) {
    var a = Math.abs(s);
    if (a < 1e-9) return "0 s";
    if (a >= 100) return s.toFixed(0) + " s";
    if (a >= 1) return s.toFixed(a >= 10 ? 1 : 2) + " s";
    if (a >= 1e-3) return (s * 1e3).toFixed(a >= 1e-2 ? 1 : 2) + " ms";
    return (s * 1e6).toFixed(0) + " \u00b5s";
  }

  /* ---- the data ------------------------------------------------------- */

  var D = JSON.parse($("pyscope-data").textContent);
  var META = D.meta, SUMMARY = D.summary, STR = D.strings;

  /* The writer's state numbers, mapped by name so that a reordering there
     cannot silently recolour the page. */
  var stateCat = D.states.map(function (name) {
    var i = STATE_NAMES.indexOf(name);
    return i < 0 ? CAT_UNKNOWN : i;
  });

  // Frames, and functions: frames of one function (name and file) merge in
  // the flame graph whatever their line.
  var nFrames = D.frames.length / 4;
  var frameFunc = new Int32Array(nFrames), frameLine = new Int32Array(nFrames);
  var funcName = [], funcFile = [], funcSynthetic = [], funcByKey = new Map();
  for (var i = 0; i < nFrames; i++) {
    var fn = STR[D.frames[4 * i]], file = STR[D.frames[4 * i + 1]];
    var key = fn + "\u0000" + file;
    var id = funcByKey.get(key);
    if (id === undefined) {
      id = funcName.length;
      funcByKey.set(key, id);
      funcName.push(fn);
      funcFile.push(file);
      funcSynthetic.push(D.frames[4 * i + 3] === 1);
    }
    frameFunc[i] = id;
    frameLine[i] = D.frames[4 * i + 2];
  }
  var nFuncs = funcName.length;

  function frameLabel(frame) {
    var f = frameFunc[frame];
    if (funcSynthetic[f] || !funcFile[f]) return funcName[f];
    return funcName[f] + " (" + funcFile[f] + (frameLine[frame] >= 0 ? ":" + frameLine[frame] : "") + ")";
  }

  // Stack prefix tree from the writer (node = parent node + frame), folded
  // into the flame graph's tree (node = parent + function). Flame node 0 is
  // the root; parents always come before their children.
  var nNodes = D.nodes.length / 2;
  var nodeFrame = new Int32Array(nNodes), nodeParent = new Int32Array(nNodes);
  var nodeFlame = new Int32Array(nNodes);
  var fParentArr = [-1], fFuncArr = [-1], fDepthArr = [0];
  var fByKey = new Map();
  for (i = 0; i < nNodes; i++) {
    var parent = D.nodes[2 * i], frame = D.nodes[2 * i + 1];
    nodeParent[i] = parent;
    nodeFrame[i] = frame;
    var pf = parent < 0 ? 0 : nodeFlame[parent];
    var func = frameFunc[frame];
    var fkey = pf * (nFuncs + 1) + func;
    var f = fByKey.get(fkey);
    if (f === undefined) {
      f = fParentArr.length;
      fByKey.set(fkey, f);
      fParentArr.push(pf);
      fFuncArr.push(func);
      fDepthArr.push(fDepthArr[pf] + 1);
    }
    nodeFlame[i] = f;
  }
  fByKey = null;
  var nF = fParentArr.length;
  var fParent = Int32Array.from(fParentArr), fFunc = Int32Array.from(fFuncArr);
  var fDepth = Int32Array.from(fDepthArr);
  fParentArr = fFuncArr = fDepthArr = null;

  // Children of each flame node, alphabetically (as flamegraph.pl), so that
  // frames keep their places when the range or the filters change.
  var funcRank = new Int32Array(nFuncs);
  (function () {
    var order = [];
    for (var k = 0; k < nFuncs; k++) order.push(k);
    order.sort(function (a, b) {
      return funcName[a] < funcName[b] ? -1 : funcName[a] > funcName[b] ? 1 :
             funcFile[a] < funcFile[b] ? -1 : funcFile[a] > funcFile[b] ? 1 : 0;
    });
    for (k = 0; k < nFuncs; k++) funcRank[order[k]] = k;
  })();
  var childStart = new Int32Array(nF + 1), childList = new Int32Array(Math.max(nF - 1, 0));
  (function () {
    var k;
    for (k = 1; k < nF; k++) childStart[fParent[k] + 1]++;
    for (k = 0; k < nF; k++) childStart[k + 1] += childStart[k];
    var fill = childStart.slice(0, nF);
    for (k = 1; k < nF; k++) childList[fill[fParent[k]]++] = k;
    for (k = 0; k < nF; k++) {
      var a = childStart[k], b = childStart[k + 1];
      if (b - a > 1) {
        var part = Array.prototype.slice.call(childList, a, b);
        part.sort(function (x, y) { return funcRank[fFunc[x]] - funcRank[fFunc[y]]; });
        for (var j = 0; j < part.length; j++) childList[a + j] = part[j];
      }
    }
  })();

  function flameOf(node) { return node < 0 ? 0 : nodeFlame[node]; }

  // Threads, in the writer's order (first seen first).
  var THREADS = SUMMARY.threads;
  var nThreads = THREADS.length;
  var severalPids = THREADS.some(function (t) { return t.pid !== THREADS[0].pid; });
  function threadLabel(t) {
    var th = THREADS[t];
    var s = th.name ? th.name + " (" + th.tid + ")" : "thread " + th.tid;
    return severalPids ? th.pid + ": " + s : s;
  }

  // Timeline: per thread, cells of whole bins with their parts.
  var TL = D.timeline;
  var binNs = TL.bin_ns, unitNs = TL.unit_ns, nBins = Math.max(TL.bins, 1);
  var binSeconds = binNs / 1e9;
  var kindCat = TL.kinds.map(function (k) { return k[1] ? CAT_GC : stateCat[k[0]] === undefined ? CAT_UNKNOWN : stateCat[k[0]]; });
  var kindState = TL.kinds.map(function (k) { return k[0]; });
  var kindLabel = TL.kinds.map(function (k, j) {
    var label = CAT_LABELS[kindCat[j]];
    if (k[1]) label = "GC (holding the GIL)";
    if (k[2] !== null && k[2] !== undefined) label += " in " + k[2];
    return label;
  });

  function decodeCells(a) {
    var nCells = 0, nParts = 0, pos = 0;
    while (pos + 3 <= a.length) {
      var n = a[pos + 2];
      nCells++;
      nParts += n;
      pos += 3 + 3 * n;
    }
    var c = {
      start: new Float64Array(nCells), end: new Float64Array(nCells),
      first: new Int32Array(nCells + 1),
      node: new Int32Array(nParts), kind: new Int32Array(nParts), w: new Float64Array(nParts),
      n: nCells
    };
    var bin = 0, k = 0, p = 0;
    pos = 0;
    for (var j = 0; j < nCells; j++) {
      bin += a[pos];
      c.start[j] = bin;
      bin += a[pos + 1];
      c.end[j] = bin;
      var m = a[pos + 2];
      pos += 3;
      c.first[j] = p;
      for (k = 0; k < m; k++, p++, pos += 3) {
        c.node[p] = a[pos];
        c.kind[p] = a[pos + 1];
        c.w[p] = a[pos + 2];
      }
    }
    c.first[nCells] = p;
    return c;
  }
  var CELLS = TL.threads.map(decodeCells);
  while (CELLS.length < nThreads) CELLS.push(decodeCells([]));
  D.timeline.threads = null;

  /* First cell of c that ends after bin b. */
  function firstCellAfter(c, b) {
    var lo = 0, hi = c.n;
    while (lo < hi) {
      var mid = (lo + hi) >> 1;
      if (c.end[mid] <= b) lo = mid + 1; else hi = mid;
    }
    return lo;
  }

  /* ---- state of the page ---------------------------------------------- */

  var selection = null;           // [startBin, endBin] or null: whole recording
  var view = [0, nBins];          // the timeline's visible bins
  var threadFilter = -1;          // -1: all threads
  var stateOn = [true, true, true, false, true];   // by state number of the writer
  (function () {
    var filters = D.filters || {};
    for (var s = 0; s < stateCat.length; s++) {
      var cat = stateCat[s];
      if (filters.gil_only) stateOn[s] = cat === CAT_HOLD;
      else stateOn[s] = cat !== CAT_IDLE || !!filters.idle;
    }
  })();
  var zoomF = 0;
  var searchRe = null;

  /* ---- header and tables ---------------------------------------------- */

  function renderMeta() {
    var dl = $("meta");
    function item(label, value, cls) {
      var div = el("div");
      div.appendChild(el("dt", null, label));
      div.appendChild(el("dd", cls ? { "class": cls } : null, value));
      dl.appendChild(div);
    }
    var cmd = META.command || "(unknown)";
    $("title-command").textContent = cmd.length > 90 ? cmd.slice(0, 88) + "\u2026" : cmd;
    document.title = "pyscope: " + (cmd.length > 60 ? cmd.slice(0, 58) + "\u2026" : cmd);
    item("Command", cmd, "command");
    item("PID", META.pid);
    item("Python", META.python_version ? "CPython " + META.python_version : "unknown");
    if (META.start_unix_ns) item("Started", new Date(META.start_unix_ns / 1e6).toLocaleString());
    item("Duration", fmtSeconds(META.duration_ns / 1e9));
    var sampling = SUMMARY.sampling || {};
    var rate = META.rate_hz > 0 ? META.rate_hz + " Hz requested" : "as fast as possible";
    item("Sample rate", (sampling.rate_hz_achieved || 0).toFixed(1) + " Hz (" + rate + ")");
    item("Passes", fmtInt(META.passes));
    item("Threads", nThreads);
    var errors = META.passes_failed + META.stacks_torn;
    item("Errors", errors === 0 ? "none" :
         fmtInt(META.passes_failed) + " incomplete pass" + (META.passes_failed === 1 ? "" : "es") +
         ", " + fmtInt(META.stacks_torn) + " torn stack" + (META.stacks_torn === 1 ? "" : "s") +
         " of " + fmtInt(META.stacks_sampled), errors ? "bad" : null);
    item("pyscope", META.pyscope_version);
  }

  function renderLegend() {
    var legend = $("legend");
    [CAT_HOLD, CAT_WAIT, CAT_RUN, CAT_IDLE, CAT_GC, CAT_UNKNOWN].forEach(function (cat) {
      var span = el("span");
      var sw = el("span", { "class": "swatch" });
      sw.style.background = CAT_COLORS[cat];
      span.appendChild(sw);
      span.appendChild(document.createTextNode(CAT_LABELS[cat]));
      legend.appendChild(span);
    });
    var sf = $("state-filter");
    for (var s = 0; s < stateCat.length; s++) {
      var label = el("label", { title: "include samples in which the thread was " + CAT_LABELS[stateCat[s]] });
      var box = el("input", { type: "checkbox", "data-state": s });
      box.checked = stateOn[s];
      box.addEventListener("change", function (ev) {
        stateOn[+ev.target.getAttribute("data-state")] = ev.target.checked;
        updateFlame();
      });
      var sw2 = el("span", { "class": "swatch" });
      sw2.style.background = CAT_COLORS[stateCat[s]];
      label.appendChild(box);
      label.appendChild(sw2);
      label.appendChild(document.createTextNode(CAT_SHORT[stateCat[s]]));
      sf.appendChild(label);
    }
  }

  function renderThreadTable() {
    var body = $("threads").tBodies[0];
    var cols = [["holding_gil_pct", CAT_HOLD], ["waiting_gil_pct", CAT_WAIT], ["running_pct", CAT_RUN],
                ["idle_pct", CAT_IDLE], ["gc_pct", CAT_GC], ["unknown_pct", CAT_UNKNOWN]];
    THREADS.forEach(function (th, t) {
      var tr = el("tr", { "data-thread": t, title: "click: show only this thread in the flame graph" });
      tr.appendChild(el("td", null, threadLabel(t)));
      tr.appendChild(el("td", null, fmtInt(th.samples)));
      cols.forEach(function (c) {
        var v = th[c[0]] || 0;
        var td = el("td", null, fmtPct(v));
        var bar = el("span", { "class": "bar" });
        bar.style.width = Math.round(v * 0.4) + "px";
        bar.style.background = CAT_COLORS[c[1]];
        td.appendChild(bar);
        tr.appendChild(td);
      });
      tr.addEventListener("click", function () { setThread(threadFilter === t ? -1 : t); });
      body.appendChild(tr);
    });
    var s = SUMMARY;
    $("gil-figures").textContent =
      "GIL utilisation: " + fmtPct(s.gil_utilisation_pct) + " of passes had a thread holding the GIL. " +
      "GC: collecting in " + fmtPct(s.gc ? s.gc.passes_pct : 0) + " of passes, " +
      fmtInt(s.gc ? s.gc.collections : 0) + " collections seen.";
    var select = $("thread-filter");
    THREADS.forEach(function (th, t) { select.appendChild(el("option", { value: t }, threadLabel(t))); });
    select.addEventListener("change", function () { setThread(+select.value); });
  }

  function renderHogs() {
    var ol = $("hogs");
    var hogs = SUMMARY.gil_hogs || [];
    if (!hogs.length) {
      ol.appendChild(el("li", null, "none: no thread held the GIL while another waited for it"));
      return;
    }
    hogs.forEach(function (h) {
      var li = el("li");
      li.appendChild(el("b", null, fmtInt(h.samples) + " sample" + (h.samples === 1 ? "" : "s")));
      li.appendChild(document.createTextNode(" (" + fmtPct(h.passes_pct) + " of passes)"));
      if (h.native_call_keeps_gil) li.appendChild(el("span", { "class": "native" }, "native call keeps the GIL"));
      var frames = h.frames || [];
      li.appendChild(el("div", { "class": "frames" }, frames.length ? frames.slice(0, 4).join("\n") : "(no Python frames)"));
      if (frames.length > 4) {
        var details = el("details", { "class": "frames" });
        details.appendChild(el("summary", null, (frames.length - 4) + " outer frame" + (frames.length === 5 ? "" : "s")));
        details.appendChild(document.createTextNode(frames.slice(4).join("\n")));
        li.appendChild(details);
      }
      ol.appendChild(li);
    });
    if (SUMMARY.gil_hog_stacks > hogs.length) {
      ol.appendChild(el("li", { style: "list-style: none" }, "(" + (SUMMARY.gil_hog_stacks - hogs.length) + " more stacks)"));
    }
  }

  /* ---- tooltip ---------------------------------------------------------- */

  var tooltip = $("tooltip");
  function showTooltip(ev, lines) {
    tooltip.textContent = "";
    lines.forEach(function (line, j) {
      if (j) tooltip.appendChild(document.createTextNode("\n"));
      if (j === 0) tooltip.appendChild(el("b", null, line));
      else tooltip.appendChild(document.createTextNode(line));
    });
    tooltip.hidden = false;
    var x = ev.clientX + 14, y = ev.clientY + 14;
    var r = tooltip.getBoundingClientRect();
    if (x + r.width > window.innerWidth - 4) x = Math.max(4, ev.clientX - r.width - 10);
    if (y + r.height > window.innerHeight - 4) y = Math.max(4, ev.clientY - r.height - 10);
    tooltip.style.left = x + "px";
    tooltip.style.top = y + "px";
  }
  function hideTooltip() { tooltip.hidden = true; }

  /* ---- canvas helpers --------------------------------------------------- */

  function sizeCanvas(canvas, width, height) {
    var dpr = window.devicePixelRatio || 1;
    canvas.style.width = width + "px";
    canvas.style.height = height + "px";
    canvas.width = Math.max(1, Math.round(width * dpr));
    canvas.height = Math.max(1, Math.round(height * dpr));
    var ctx = canvas.getContext("2d");
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    return ctx;
  }

  function fitText(ctx, text, width) {
    if (width < 8) return "";
    if (ctx.measureText(text).width <= width) return text;
    var lo = 0, hi = text.length;
    while (lo < hi) {
      var mid = (lo + hi + 1) >> 1;
      if (ctx.measureText(text.slice(0, mid) + "\u2026").width <= width) lo = mid; else hi = mid - 1;
    }
    return lo > 0 ? text.slice(0, lo) + "\u2026" : "";
  }

  /* ---- timeline --------------------------------------------------------- */

  var tlCanvas = $("timeline"), tlOverlay = $("timeline-overlay");
  var LABEL_W = 200, AXIS_H = 22, PAD_R = 10;
  var rowH = Math.max(7, Math.min(18, Math.floor(600 / Math.max(nThreads, 1))));
  var rowGap = rowH >= 10 ? 2 : 1;
  var tl = { width: 0, plotW: 0, height: 0 };

  function binToX(b) { return LABEL_W + (b - view[0]) / (view[1] - view[0]) * tl.plotW; }
  function xToBin(x) { return view[0] + (x - LABEL_W) / tl.plotW * (view[1] - view[0]); }

  function niceStep(rough) {
    var p = Math.pow(10, Math.floor(Math.log10(rough)));
    var m = rough / p;
    return (m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10) * p;
  }

  function renderTimeline() {
    var wrap = $("timeline-wrap");
    tl.width = Math.max(wrap.clientWidth, 400);
    tl.plotW = tl.width - LABEL_W - PAD_R;
    tl.height = AXIS_H + nThreads * (rowH + rowGap) + 4;
    var ctx = sizeCanvas(tlCanvas, tl.width, tl.height);
    sizeCanvas(tlOverlay, tl.width, tl.height);
    ctx.clearRect(0, 0, tl.width, tl.height);
    ctx.font = "11px system-ui, sans-serif";
    ctx.textBaseline = "middle";

    // Axis: seconds since the recording started.
    var s0 = view[0] * binSeconds, s1 = view[1] * binSeconds;
    var step = niceStep((s1 - s0) / Math.max(2, tl.plotW / 90));
    ctx.fillStyle = "#5f6873";
    ctx.strokeStyle = "#e3e6ea";
    for (var s = Math.ceil(s0 / step) * step; s <= s1 + step * 1e-9; s += step) {
      var x = Math.round(binToX(s / binSeconds)) + 0.5;
      ctx.beginPath();
      ctx.moveTo(x, AXIS_H - 4);
      ctx.lineTo(x, tl.height);
      ctx.stroke();
      var label = fmtSeconds(s);
      var w = ctx.measureText(label).width;
      ctx.fillText(label, Math.min(Math.max(x - w / 2, LABEL_W), tl.width - w - 2), AXIS_H / 2);
    }

    // Rows, drawn pixel by pixel: each device-pixel column stacks the share
    // of each category in the time it covers.
    var dpr = window.devicePixelRatio || 1;
    var cols = Math.max(1, Math.round(tl.plotW * dpr));
    var hDev = Math.max(1, Math.round(rowH * dpr));
    var binsPerCol = (view[1] - view[0]) / cols;
    var acc = new Float64Array(cols * N_CATS);
    var catW = new Float64Array(N_CATS);
    var img = ctx.createImageData(cols, hDev);
    for (var t = 0; t < nThreads; t++) {
      var y = AXIS_H + t * (rowH + rowGap);
      ctx.fillStyle = t === threadFilter ? "#2f6fdc" : "#1d2126";
      ctx.font = (t === threadFilter ? "600 " : "") + "11px system-ui, sans-serif";
      ctx.fillText(fitText(ctx, threadLabel(t), LABEL_W - 10), 4, y + rowH / 2);
      acc.fill(0);
      var c = CELLS[t];
      for (var j = firstCellAfter(c, view[0]); j < c.n && c.start[j] < view[1]; j++) {
        catW.fill(0);
        for (var p = c.first[j]; p < c.first[j + 1]; p++) catW[kindCat[c.kind[p]]] += c.w[p];
        var a = (c.start[j] - view[0]) / binsPerCol, b = (c.end[j] - view[0]) / binsPerCol;
        var span = b - a;
        var ca = Math.max(0, Math.floor(a)), cb = Math.min(cols, Math.ceil(b));
        for (var col = ca; col < cb; col++) {
          var frac = (Math.min(b, col + 1) - Math.max(a, col)) / span;
          if (frac <= 0) continue;
          var base = col * N_CATS;
          for (var k = 0; k < N_CATS; k++) if (catW[k]) acc[base + k] += catW[k] * frac;
        }
      }
      var full = binsPerCol * UNITS_PER_BIN;
      var data = img.data;
      for (col = 0; col < cols; col++) {
        base = col * N_CATS;
        var total = 0;
        for (k = 0; k < N_CATS; k++) total += acc[base + k];
        var filled = total > 0 ? Math.max(1, Math.round(hDev * Math.min(1, total / full))) : 0;
        var top = hDev - filled, row = 0;
        for (; row < top; row++) {
          var o = (row * cols + col) * 4;
          data[o] = EMPTY_RGB[0]; data[o + 1] = EMPTY_RGB[1]; data[o + 2] = EMPTY_RGB[2]; data[o + 3] = 255;
        }
        var used = 0;
        for (var q = 0; q < CAT_STACK_ORDER.length; q++) {
          var cat = CAT_STACK_ORDER[q];
          if (!acc[base + cat]) continue;
          used += acc[base + cat];
          var until = top + Math.round(filled * used / total);
          var rgb = CAT_RGB[cat];
          for (; row < until; row++) {
            o = (row * cols + col) * 4;
            data[o] = rgb[0]; data[o + 1] = rgb[1]; data[o + 2] = rgb[2]; data[o + 3] = 255;
          }
        }
      }
      ctx.putImageData(img, Math.round(LABEL_W * dpr), Math.round(y * dpr));
    }
    tl.rowsDrawn = nThreads;
    renderOverlay(null);
    $("reset-timeline").disabled = view[0] === 0 && view[1] === nBins;
  }

  function renderOverlay(hoverX) {
    var dpr = window.devicePixelRatio || 1;
    var ctx = tlOverlay.getContext("2d");
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, tl.width, tl.height);
    if (selection) {
      var xa = Math.max(LABEL_W, binToX(selection[0])), xb = Math.min(LABEL_W + tl.plotW, binToX(selection[1]));
      if (xb >= LABEL_W && xa <= LABEL_W + tl.plotW) {
        ctx.fillStyle = "rgba(47, 111, 220, 0.16)";
        ctx.fillRect(xa, AXIS_H - 4, Math.max(1, xb - xa), tl.height - AXIS_H + 4);
        ctx.strokeStyle = "rgba(47, 111, 220, 0.9)";
        ctx.lineWidth = 1;
        ctx.strokeRect(Math.round(xa) + 0.5, AXIS_H - 3.5, Math.max(1, Math.round(xb - xa)), tl.height - AXIS_H + 2);
      }
    }
    if (hoverX !== null && hoverX >= LABEL_W && hoverX <= LABEL_W + tl.plotW) {
      ctx.strokeStyle = "rgba(29, 33, 38, 0.5)";
      ctx.beginPath();
      ctx.moveTo(Math.round(hoverX) + 0.5, AXIS_H - 4);
      ctx.lineTo(Math.round(hoverX) + 0.5, tl.height);
      ctx.stroke();
    }
  }

  function rowAt(y) {
    var t = Math.floor((y - AXIS_H) / (rowH + rowGap));
    return t >= 0 && t < nThreads ? t : -1;
  }

  function cellAt(t, bin) {
    var c = CELLS[t];
    var j = firstCellAfter(c, bin);
    return j < c.n && c.start[j] <= bin ? j : -1;
  }

  function timelineTooltip(ev, x, y) {
    var t = rowAt(y);
    if (t < 0) { hideTooltip(); return; }
    if (x < LABEL_W) {
      showTooltip(ev, [threadLabel(t), "click: show only this thread in the flame graph"]);
      return;
    }
    var bin = xToBin(x);
    var lines = [threadLabel(t), "at " + fmtSeconds(bin * binSeconds)];
    var j = cellAt(t, bin);
    if (j < 0) {
      lines.push("not sampled here");
    } else {
      var c = CELLS[t];
      lines.push(fmtSeconds(c.start[j] * binSeconds) + " \u2013 " + fmtSeconds(c.end[j] * binSeconds) +
                 (c.end[j] - c.start[j] > 1 ? " (one stretch)" : ""));
      var total = 0, byKind = new Map(), byNode = new Map();
      for (var p = c.first[j]; p < c.first[j + 1]; p++) {
        total += c.w[p];
        byKind.set(c.kind[p], (byKind.get(c.kind[p]) || 0) + c.w[p]);
        var key = c.node[p] + ":" + kindState[c.kind[p]];
        byNode.set(key, (byNode.get(key) || 0) + c.w[p]);
      }
      Array.from(byKind.entries()).sort(function (u, v) { return v[1] - u[1]; }).forEach(function (e) {
        lines.push(fmtPct(100 * e[1] / total) + "  " + kindLabel[e[0]]);
      });
      var stacks = Array.from(byNode.entries()).sort(function (u, v) { return v[1] - u[1]; });
      stacks.slice(0, 3).forEach(function (e) {
        var node = +e[0].split(":")[0];
        lines.push(fmtPct(100 * e[1] / total) + "  in " + (node < 0 ? "(no Python frames)" : frameLabel(nodeFrame[node])));
      });
      if (stacks.length > 3) lines.push("\u2026 and " + (stacks.length - 3) + " more stacks");
    }
    lines.push("drag: select a range; click: select this stretch");
    showTooltip(ev, lines);
  }

  function setupTimelineEvents() {
    var drag = null;
    function pos(ev) {
      var r = tlOverlay.getBoundingClientRect();
      return [ev.clientX - r.left, ev.clientY - r.top];
    }
    tlOverlay.addEventListener("mousedown", function (ev) {
      if (ev.button !== 0) return;
      var xy = pos(ev);
      drag = { x: xy[0], y: xy[1], moved: false };
      ev.preventDefault();
    });
    window.addEventListener("mousemove", function (ev) {
      if (!drag) return;
      var xy = pos(ev);
      if (Math.abs(xy[0] - drag.x) > 3) drag.moved = true;
      if (drag.moved && drag.x >= LABEL_W) {
        var a = clampBin(xToBin(Math.min(drag.x, xy[0]))), b = clampBin(xToBin(Math.max(drag.x, xy[0])));
        selection = [a, b];
        renderOverlay(xy[0]);
      }
    });
    window.addEventListener("mouseup", function (ev) {
      if (!drag) return;
      var d = drag;
      drag = null;
      var xy = pos(ev);
      if (d.moved && d.x >= LABEL_W) {
        var a = clampBin(xToBin(Math.min(d.x, xy[0]))), b = clampBin(xToBin(Math.max(d.x, xy[0])));
        setSelection(b > a ? [a, b] : null);
        return;
      }
      var t = rowAt(d.y);
      if (t < 0) return;
      if (d.x < LABEL_W) { setThread(threadFilter === t ? -1 : t); return; }
      var j = cellAt(t, xToBin(d.x));
      if (j >= 0) setSelection([CELLS[t].start[j], CELLS[t].end[j]]);
    });
    tlOverlay.addEventListener("mousemove", function (ev) {
      var xy = pos(ev);
      if (!drag) renderOverlay(xy[0]);
      timelineTooltip(ev, xy[0], xy[1]);
    });
    tlOverlay.addEventListener("mouseleave", function () { hideTooltip(); renderOverlay(null); });
    $("zoom-selection").addEventListener("click", function () {
      if (!selection) return;
      var pad = (selection[1] - selection[0]) * 0.05;
      view = [Math.max(0, selection[0] - pad), Math.min(nBins, selection[1] + pad)];
      renderTimeline();
    });
    $("clear-selection").addEventListener("click", function () { setSelection(null); });
    $("reset-timeline").addEventListener("click", function () { view = [0, nBins]; renderTimeline(); });
    document.addEventListener("keydown", function (ev) {
      if (ev.key === "Escape" && document.activeElement !== $("search")) setSelection(null);
    });
  }

  function clampBin(b) { return Math.max(0, Math.min(nBins, b)); }

  function setSelection(sel) {
    selection = sel;
    $("zoom-selection").disabled = !sel;
    $("clear-selection").disabled = !sel;
    $("selection-label").textContent = sel
      ? "selected " + fmtSeconds(sel[0] * binSeconds) + " \u2013 " + fmtSeconds(sel[1] * binSeconds) +
        " (" + fmtSeconds((sel[1] - sel[0]) * binSeconds) + ")"
      : "no selection: the flame graph shows the whole recording";
    renderOverlay(null);
    updateFlame();
  }

  function setThread(t) {
    threadFilter = t;
    $("thread-filter").value = String(t);
    var rows = $("threads").tBodies[0].rows;
    for (var k = 0; k < rows.length; k++) rows[k].className = k === t ? "selected" : "";
    renderTimeline();
    updateFlame();
  }

  /* ---- flame graph ------------------------------------------------------ */

  var flameCanvas = $("flame");
  var selfW = new Float64Array(nF), totalW = new Float64Array(nF);
  var FLAME_ROW = 18;
  var flame = { rects: [], width: 0, fromCounts: true };

  function computeFlame() {
    selfW.fill(0);
    var t, k;
    flame.fromCounts = !selection;
    if (!selection) {
      var counts = D.counts;
      for (k = 0; k + 3 < counts.length; k += 4) {
        t = counts[k];
        if (threadFilter >= 0 && t !== threadFilter) continue;
        if (!stateOn[counts[k + 2]]) continue;
        selfW[flameOf(counts[k + 1])] += counts[k + 3];
      }
    } else {
      var b0 = selection[0], b1 = selection[1];
      for (t = 0; t < nThreads; t++) {
        if (threadFilter >= 0 && t !== threadFilter) continue;
        var c = CELLS[t];
        for (var j = firstCellAfter(c, b0); j < c.n && c.start[j] < b1; j++) {
          var frac = (Math.min(b1, c.end[j]) - Math.max(b0, c.start[j])) / (c.end[j] - c.start[j]);
          if (frac <= 0) continue;
          for (var p = c.first[j]; p < c.first[j + 1]; p++) {
            if (!stateOn[kindState[c.kind[p]]]) continue;
            selfW[flameOf(c.node[p])] += c.w[p] * frac;
          }
        }
      }
    }
    totalW.set(selfW);
    for (var f = nF - 1; f > 0; f--) totalW[fParent[f]] += totalW[f];
  }

  function fmtWeight(w) {
    if (flame.fromCounts) return fmtInt(w) + " sample" + (Math.round(w) === 1 ? "" : "s");
    return fmtSeconds(w * unitNs / 1e9);
  }

  function funcColor(func) {
    if (funcSynthetic[func]) return "#f2a100";
    var name = funcName[func], h = 0;
    for (var k = 0; k < name.length; k++) h = (h * 31 + name.charCodeAt(k)) >>> 0;
    var hue = 8 + (h % 44), light = 55 + ((h >>> 8) % 14);
    return "hsl(" + hue + ", 78%, " + light + "%)";
  }

  var funcMatches = null;
  function searchMatches() {
    if (!searchRe) return null;
    if (funcMatches) return funcMatches;
    funcMatches = new Uint8Array(nFuncs);
    for (var k = 0; k < nFuncs; k++) {
      if (searchRe.test(funcName[k]) || searchRe.test(funcFile[k])) funcMatches[k] = 1;
    }
    return funcMatches;
  }

  function renderFlame() {
    var wrap = $("flame-wrap");
    var width = Math.max(wrap.clientWidth - 2, 300);
    if (totalW[zoomF] <= 0) zoomF = 0;
    var rects = [];
    // The zoomed frame and its ancestors span the whole width.
    var path = [];
    for (var f = zoomF; f >= 0; f = f === 0 ? -1 : fParent[f]) path.unshift(f);
    path.forEach(function (a, d) { rects.push([a, 0, width, d]); });
    var maxDepth = path.length - 1;
    var scale = totalW[zoomF] > 0 ? width / totalW[zoomF] : 0;
    var stack = [[zoomF, 0]];
    while (stack.length) {
      var top = stack.pop(), node = top[0], x = top[1];
      for (var k = childStart[node]; k < childStart[node + 1]; k++) {
        var ch = childList[k];
        var w = totalW[ch] * scale;
        if (w >= 0.35) {
          var d = fDepth[ch] - fDepth[zoomF] + path.length - 1;
          rects.push([ch, x, w, d]);
          if (d > maxDepth) maxDepth = d;
          stack.push([ch, x]);
        }
        x += w;
      }
    }
    var height = (maxDepth + 1) * FLAME_ROW + 2;
    var ctx = sizeCanvas(flameCanvas, width, height);
    ctx.clearRect(0, 0, width, height);
    ctx.font = "11px system-ui, sans-serif";
    ctx.textBaseline = "middle";
    var matches = searchMatches();
    for (var r = 0; r < rects.length; r++) {
      var rc = rects[r];
      var fn = rc[0], y = rc[3] * FLAME_ROW;
      var func = fFunc[fn];
      var isAncestor = r < path.length - 1;
      ctx.fillStyle = fn === 0 ? "#d8dce1" : matches && matches[func] ? "#d63cd6" : funcColor(func);
      if (isAncestor) ctx.globalAlpha = 0.55;
      ctx.fillRect(rc[1], y, Math.max(rc[2] - (rc[2] > 3 ? 1 : 0), 0.35), FLAME_ROW - 1);
      ctx.globalAlpha = 1;
      if (rc[2] > 24) {
        var label = fn === 0 ? "all (" + fmtWeight(totalW[0]) + ")" : funcName[func];
        ctx.fillStyle = "#1d2126";
        ctx.fillText(fitText(ctx, label, rc[2] - 6), rc[1] + 3, y + FLAME_ROW / 2);
      }
    }
    flame.rects = rects;
    flame.width = width;
    flame.pathLen = path.length;
    $("reset-zoom").disabled = zoomF === 0;
    renderSearchResult();
  }

  function renderSearchResult() {
    var out = $("search-result");
    var matches = searchMatches();
    if (!matches) { out.textContent = ""; return; }
    // Count each matching frame once, not again under a matching ancestor.
    var covered = new Uint8Array(nF), sum = 0;
    for (var f = 1; f < nF; f++) {
      if (covered[fParent[f]]) { covered[f] = 1; continue; }
      if (matches[fFunc[f]]) { covered[f] = 1; sum += totalW[f]; }
    }
    out.textContent = "matched " + fmtPct(totalW[0] ? 100 * sum / totalW[0] : 0) + " (" + fmtWeight(sum) + ")";
  }

  function updateFlame() {
    computeFlame();
    renderFlame();
    var parts = [];
    parts.push(selection ? "time " + fmtSeconds(selection[0] * binSeconds) + " \u2013 " +
                           fmtSeconds(selection[1] * binSeconds) + " (from the timeline)"
                         : "the whole recording (from the sample counts)");
    parts.push(threadFilter < 0 ? "all threads" : threadLabel(threadFilter));
    var states = [];
    for (var s = 0; s < stateCat.length; s++) if (stateOn[s]) states.push(CAT_LABELS[stateCat[s]]);
    parts.push(states.length ? states.join(", ") : "no state selected");
    parts.push(fmtWeight(totalW[0]) + " in all");
    var text = "Showing " + parts.join(" \u00b7 ");
    if (D.pruned && D.pruned.nodes > 0) {
      text += ". " + fmtInt(D.pruned.samples) + " samples in " + fmtInt(D.pruned.nodes) +
              " rare stack prefixes are shown at their nearest kept caller, to keep this file small.";
    }
    $("flame-status").textContent = text;
  }

  function flameHit(x, y) {
    var d = Math.floor(y / FLAME_ROW);
    for (var r = flame.rects.length - 1; r >= 0; r--) {
      var rc = flame.rects[r];
      if (rc[3] === d && x >= rc[1] && x < rc[1] + Math.max(rc[2], 1)) return rc;
    }
    return null;
  }

  function setupFlameEvents() {
    function pos(ev) {
      var r = flameCanvas.getBoundingClientRect();
      return [ev.clientX - r.left, ev.clientY - r.top];
    }
    flameCanvas.addEventListener("mousemove", function (ev) {
      var xy = pos(ev), rc = flameHit(xy[0], xy[1]);
      if (!rc) { hideTooltip(); return; }
      var f = rc[0];
      if (f === 0) {
        showTooltip(ev, ["all", fmtWeight(totalW[0])]);
        return;
      }
      var func = fFunc[f];
      var lines = [funcName[func]];
      if (funcFile[func]) lines.push(funcFile[func]);
      lines.push(fmtWeight(totalW[f]) + ", " + fmtPct(100 * totalW[f] / (totalW[0] || 1)) + " of all" +
                 (zoomF ? ", " + fmtPct(100 * totalW[f] / (totalW[zoomF] || 1)) + " of the zoomed frame" : ""));
      lines.push("self: " + fmtWeight(selfW[f]) + " (" + fmtPct(100 * selfW[f] / (totalW[0] || 1)) + ")");
      showTooltip(ev, lines);
    });
    flameCanvas.addEventListener("mouseleave", hideTooltip);
    flameCanvas.addEventListener("click", function (ev) {
      var xy = pos(ev), rc = flameHit(xy[0], xy[1]);
      if (!rc) return;
      zoomF = rc[0];
      renderFlame();
    });
    $("reset-zoom").addEventListener("click", function () { zoomF = 0; renderFlame(); });
    var search = $("search"), pending = 0;
    search.addEventListener("input", function () {
      clearTimeout(pending);
      pending = setTimeout(function () {
        var q = search.value.trim();
        funcMatches = null;
        if (!q) searchRe = null;
        else {
          try { searchRe = new RegExp(q, "i"); }
          catch (e) { searchRe = new RegExp(q.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"), "i"); }
        }
        renderFlame();
      }, 120);
    });
  }

  /* ---- for scripts and tests ------------------------------------------- */

  /* The function with the most self weight in the flame graph as shown. */
  function topFunction() {
    var byFunc = new Float64Array(nFuncs), best = -1;
    for (var f = 1; f < nF; f++) byFunc[fFunc[f]] += selfW[f];
    for (var k = 0; k < nFuncs; k++) if (best < 0 || byFunc[k] > byFunc[best]) best = k;
    return best < 0 || byFunc[best] <= 0 ? null : { name: funcName[best], file: funcFile[best], weight: byFunc[best] };
  }

  /* The widest frames drawn below the root, widest first. */
  function widestFrames(n) {
    return flame.rects.slice(flame.pathLen).sort(function (a, b) { return b[2] - a[2]; })
      .slice(0, n || 10).map(function (rc) {
        return { name: funcName[fFunc[rc[0]]], file: funcFile[fFunc[rc[0]]], width: rc[2], depth: rc[3], self: selfW[rc[0]] };
      });
  }

  window.pyscopeReport = {
    topFunction: topFunction,
    widestFrames: widestFrames,
    framesDrawn: function () { return flame.rects.length; },
    flameWidth: function () { return flame.width; },
    selection: function () { return selection ? [selection[0] * binSeconds, selection[1] * binSeconds] : null; },
    /* Where the timeline's rows are, in CSS pixels of the viewport. */
    timelineGeometry: function () {
      var r = tlOverlay.getBoundingClientRect();
      return { left: r.left, top: r.top, labelWidth: LABEL_W, plotWidth: tl.plotW, axisHeight: AXIS_H,
               rowHeight: rowH, rowGap: rowGap, viewSeconds: [view[0] * binSeconds, view[1] * binSeconds] };
    },
    timelineRows: function () { return tl.rowsDrawn; },
    flameTotal: function () { return totalW[0]; },
    select: function (t0, t1) { setSelection(t0 === null ? null : [clampBin(t0 / binSeconds), clampBin(t1 / binSeconds)]); },
    setThread: setThread,
    search: function (q) { var s = $("search"); s.value = q; s.dispatchEvent(new Event("input")); },
    binSeconds: binSeconds,
    threads: nThreads
  };

  /* ---- start ------------------------------------------------------------ */

  renderMeta();
  renderLegend();
  renderThreadTable();
  renderHogs();
  setupTimelineEvents();
  setupFlameEvents();
  renderTimeline();
  updateFlame();
  var resizeQueued = false;
  window.addEventListener("resize", function () {
    if (resizeQueued) return;
    resizeQueued = true;
    requestAnimationFrame(function () { resizeQueued = false; renderTimeline(); renderFlame(); });
  });
  var readyMs = (window.performance && performance.now) ? performance.now() : 0;
  window.pyscopeReport.scriptMs = readyMs - started;
  window.pyscopeReport.readyMs = readyMs;
  document.documentElement.setAttribute("data-ready", "1");
})();
