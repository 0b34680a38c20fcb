// Locust's tables render their cells as text only, so the LLM run tab's report and dashboard
// addresses were not clickable (audit D14). Mark every cell whose whole text is a URL or a path of
// this UI and open it on click. Only data-* attributes are added: React owns the cells' children.
(function () {
  "use strict";
  const URLISH = /^(https?:\/\/\S+|\/\S*llm(\/\S*)?)$/;
  const style = document.createElement("style");
  style.textContent = "td[data-harness-link]{color:#1976d2;text-decoration:underline;cursor:pointer}";
  document.head.appendChild(style);
  function mark() {
    for (const td of document.querySelectorAll("td")) {
      const text = td.textContent.trim();
      if (URLISH.test(text)) {
        if (td.dataset.harnessLink !== text) {
          td.dataset.harnessLink = text;
          td.title = "open " + text;
        }
      } else if (td.dataset.harnessLink !== undefined) {
        delete td.dataset.harnessLink;
        td.removeAttribute("title");
      }
    }
  }
  new MutationObserver(mark).observe(document.body, { subtree: true, childList: true, characterData: true });
  document.addEventListener("click", (e) => {
    const td = e.target.closest && e.target.closest("td[data-harness-link]");
    if (td) window.open(td.dataset.harnessLink, "_blank", "noopener");
  });
  mark();
})();
