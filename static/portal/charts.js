/* Charts of the fleet and chargeback pages, drawn with the vendored uPlot from data the
   server put in the page with json_script.  No build step: plain ES2017. */
(function () {
  "use strict";
  var COLOURS = ["#2f6fd0", "#d9822b", "#2e9e6a", "#b23b7a", "#6b5fc7", "#8a8a8a"];

  function data(id) {
    var node = document.getElementById(id);
    return node ? JSON.parse(node.textContent) : null;
  }

  function width(el) { return Math.max(320, Math.min(el.clientWidth || 640, 900)); }

  function seconds(v) { return v == null ? "—" : v < 120 ? v.toFixed(0) + " s" : (v / 60).toFixed(1) + " min"; }

  function money(v) { return v == null ? "—" : v.toLocaleString(undefined, {maximumFractionDigits: 2}); }

  /* One chart: x values, and series {label, values, colour, dash, bars, fmt}. */
  function draw(el, title, xs, series, opts) {
    opts = opts || {};
    var box = document.createElement("figure");
    box.className = "chart";
    box.setAttribute("role", "img");
    box.setAttribute("aria-label", title);
    var cap = document.createElement("figcaption");
    cap.textContent = title;
    box.appendChild(cap);
    el.appendChild(box);
    var fmt = opts.fmt || function (v) { return v == null ? "—" : String(v); };
    var uSeries = [{label: opts.months ? "month" : "time",
                    value: opts.months ? function (u, v) { return opts.months[v] || ""; } : undefined}];
    series.forEach(function (s, i) {
      uSeries.push({label: s.label, stroke: s.colour || COLOURS[i % COLOURS.length], width: 2,
                    dash: s.dash, fill: s.bars ? (s.colour || COLOURS[i % COLOURS.length]) + "cc" : undefined,
                    // grouped bars: the first of two sits left of its month, the second right
                    paths: s.bars ? uPlot.paths.bars({size: [0.7 / (opts.barCount || 1), 60],
                                                      align: opts.barCount === 2 ? (s.barIndex ? 1 : -1) : 0})
                                  : undefined,
                    points: {show: !s.bars && xs.length < 40}, spanGaps: true,
                    value: function (u, v) { return fmt(v); }});
    });
    var axes = [{}, {values: function (u, vals) { return vals.map(fmt); }, size: 70}];
    if (opts.months) {
      axes[0] = {values: function (u, vals) { return vals.map(function (v) { return opts.months[v] || ""; }); },
                 splits: function () { return xs; }};
    }
    var scales = {x: {time: !opts.months}};
    if (opts.months) { scales.x.range = function () { return [-0.6, xs.length - 0.4]; }; }
    /* the least top of the y axis: a seconds axis of waits all under a second would label
       its ticks 0 s, 0 s, 1 s, 1 s... (whole seconds), so it shows at least a minute */
    var leastTop = opts.leastTop || 1;
    scales.y = {range: function (u, min, max) { return [0, Math.max(leastTop, max * 1.1)]; }};
    new uPlot({width: width(el), height: 240, series: uSeries, axes: axes, scales: scales, legend: {live: true}},
              [xs].concat(series.map(function (s) { return s.values; })), box);
  }

  function fleet(d) {
    var waits = document.getElementById("chart-waits");
    if (waits) {
      d.waits.forEach(function (t, i) {
        draw(waits, "Queue wait and time to first GPU, p95 — " + t.tenant, t.t, [
          {label: "queue wait p95", values: t.queue_wait_p95_s, colour: COLOURS[0]},
          {label: "time to first GPU p95", values: t.time_to_first_gpu_p95_s, colour: COLOURS[1]}],
          {fmt: seconds, leastTop: 60});
      });
    }
    var cap = document.getElementById("chart-capacity");
    if (cap) {
      d.capacity.forEach(function (c) {
        var unit = c.resource === "gpu" ? "GPUs"
          : c.resource.indexOf("shares-") === 0 ? "GPU shares (" + c.resource.replace(/^shares-/, "") + ")"
          : "MIG slices (" + c.resource.replace(/^mig-/, "") + ")";
        draw(cap, c.cluster + ": " + unit + " by state", c.t, [
          {label: "total", values: c.total, colour: COLOURS[5], dash: [4, 4]},
          {label: "allocated", values: c.allocated, colour: COLOURS[0]},
          {label: "reserved", values: c.reserved, colour: COLOURS[1]},
          {label: "idle", values: c.idle, colour: COLOURS[2]}]);
      });
    }
  }

  function chargeback(d) {
    var xs = d.months.map(function (m, i) { return i; });
    var flat = function (v) { return xs.map(function () { return v; }); };
    var spend = document.getElementById("chart-spend");
    if (spend) {
      var s = [{label: "cloud spend", values: d.cloud_spend, bars: true, colour: COLOURS[1]},
               {label: "of which estimated, not yet billed", values: d.cloud_estimated, colour: COLOURS[5], dash: [3, 3]},
               {label: "on-prem TCO of those GPU-hours", values: d.onprem_tco, colour: COLOURS[0]},
               {label: Math.round(d.warning_band[0] * 100) + "% of TCO", colour: "#c0392b", dash: [6, 4],
                values: d.onprem_tco.map(function (v) { return v * d.warning_band[0]; })},
               {label: Math.round(d.warning_band[1] * 100) + "% of TCO", colour: "#7f1d1d", dash: [2, 3],
                values: d.onprem_tco.map(function (v) { return v * d.warning_band[1]; })}];
      if (d.budget != null) { s.push({label: "monthly budget", values: flat(d.budget), colour: COLOURS[3], dash: [10, 4]}); }
      draw(spend, "Cloud spend per month against the budget and the on-prem TCO", xs, s,
           {months: d.months, fmt: money, barCount: 1});
    }
    var mtd = document.getElementById("chart-month-to-date");
    if (mtd && d.month_to_date.t.length) {
      var m = [{label: "cloud spend so far", values: d.month_to_date.spend, colour: COLOURS[1]}];
      if (d.budget != null) { m.push({label: "budget", values: d.month_to_date.t.map(function () { return d.budget; }),
                                      colour: COLOURS[3], dash: [10, 4]}); }
      draw(mtd, "Cloud spend in " + d.month_to_date.month + " so far (estimated from run time and list price)",
           d.month_to_date.t, m, {fmt: money});
    }
    var hours = document.getElementById("chart-hours");
    if (hours) {
      draw(hours, "GPU-hours per month, on-prem and cloud", xs, [
        {label: "on-prem", values: d.onprem_hours, bars: true, barIndex: 0, colour: COLOURS[0]},
        {label: "cloud", values: d.cloud_hours, bars: true, barIndex: 1, colour: COLOURS[1]}],
        {months: d.months, fmt: money, barCount: 2});
    }
  }

  function start() {
    if (typeof uPlot === "undefined") { return; }
    var f = data("fleet-chart-data");
    if (f) { fleet(f); }
    var c = data("chargeback-chart-data");
    if (c) { chargeback(c); }
  }

  if (document.readyState === "loading") { document.addEventListener("DOMContentLoaded", start); } else { start(); }
})();
