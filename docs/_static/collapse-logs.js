// pymc_dp docs: a notebook cell's log (its stderr output: PyMC's sampler progress and notices)
// is folded into one <details> box whose summary is the log's first line and its length. The
// text stays on the page (and in the search index); one click shows it whole, and a log that holds
// a warning is shown open.
document.addEventListener("DOMContentLoaded", () => {
  for (const output of document.querySelectorAll("div.cell_output > div.output.stderr")) {
    const pre = output.querySelector("pre"); // its text alone, not the copy button's
    const text = (pre ? pre.textContent : output.textContent).trim();
    if (!text) continue;
    const lines = text.split("\n").filter((line) => line.trim());
    const details = document.createElement("details");
    details.className = "pymc-dp-log";
    const summary = document.createElement("summary");
    const more = lines.length > 1 ? ` … (${lines.length} lines)` : "";
    // a log that holds a Python warning stays open: the reader should see it
    const warns = /\w*Warning\b/.test(text);
    details.open = warns;
    summary.textContent = `${warns ? "log with a warning" : "log"}: ${lines[0].slice(0, 100)}${more}`;
    details.appendChild(summary);
    output.replaceWith(details);
    details.appendChild(output);
  }
});
