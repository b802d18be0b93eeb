// Shrinks the slide on screen until its content fits the 1280x720 page (tools/make_slides.py):
// a figure, a wide table or a long printout is scaled with the text around it, never cut.
// A slide is measured when it is shown, and again when an image or MathJax changes its size.
function fitSlide(slide) {
  if (!slide || slide.querySelector("section")) return;
  let box = slide.querySelector(":scope > .slide-fit");
  if (!box) {
    box = document.createElement("div");
    box.className = "slide-fit";
    box.append(...slide.childNodes);
    slide.append(box);
  }
  const fits = () => slide.scrollHeight <= slide.clientHeight && slide.scrollWidth <= slide.clientWidth;
  box.style.zoom = 1;
  if (fits()) return;
  let low = 0.1, high = 1;  // the largest zoom that fits, to within 1%
  while (high - low > 0.01) {
    box.style.zoom = (low + high) / 2;
    if (fits()) low = (low + high) / 2; else high = (low + high) / 2;
  }
  box.style.zoom = low;
}
const SHORT_CELL = 24;  // characters: a number with its unit, a name; longer cells are prose and wrap
document.querySelectorAll(".reveal td, .reveal th").forEach(cell => {
  if (cell.textContent.trim().length <= SHORT_CELL) cell.classList.add("short-cell");
});
const fitCurrentSlide = () => fitSlide(Reveal.getCurrentSlide());
Reveal.on("ready", fitCurrentSlide);
Reveal.on("slidechanged", fitCurrentSlide);
document.querySelectorAll(".reveal img").forEach(img => img.addEventListener("load", fitCurrentSlide));
if (window.MathJax && MathJax.startup && MathJax.startup.promise) MathJax.startup.promise.then(fitCurrentSlide);
