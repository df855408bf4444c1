// Copy buttons: the console's only script, and an enhancement. A button
// <button type="button" class="copy" data-copy="ID" hidden> copies the
// text of the element with id ID (an input's value, else its text). The
// buttons are rendered hidden and shown here, so that without script the
// page shows no button that does nothing; the text itself stays
// selectable either way.
"use strict";
(function () {
  function text(el) {
    return "value" in el && typeof el.value === "string" ? el.value : el.textContent;
  }
  function copied(button, label) {
    var status = button.nextElementSibling;
    if (status && status.classList.contains("copy-status")) {
      status.textContent = label;
    }
  }
  document.querySelectorAll("button.copy[data-copy]").forEach(function (button) {
    var target = document.getElementById(button.getAttribute("data-copy"));
    if (!target || !navigator.clipboard) {
      return;
    }
    button.hidden = false;
    button.addEventListener("click", function () {
      navigator.clipboard.writeText(text(target).trim()).then(
        function () { copied(button, "Copied"); },
        function () { copied(button, "Select the text and copy it"); }
      );
    });
  });
})();
