// Copy buttons: the command text of the <pre> beside the button. Works offline; falls back to selecting it.
document.addEventListener("click", function (ev) {
  var b = ev.target.closest ? ev.target.closest("button[data-copy]") : null;
  if (!b) return;
  var pre = document.getElementById(b.getAttribute("data-copy"));
  if (!pre) return;
  var text = pre.textContent;
  function done() { b.textContent = "copied"; setTimeout(function () { b.textContent = "copy"; }, 1500); }
  function select() { var r = document.createRange(); r.selectNodeContents(pre); var s = getSelection(); s.removeAllRanges(); s.addRange(r); try { document.execCommand("copy"); done(); } catch (e) { b.textContent = "selected"; } }
  if (navigator.clipboard && window.isSecureContext) { navigator.clipboard.writeText(text).then(done, select); } else { select(); }
});
