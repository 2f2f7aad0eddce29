// Typesets the math placeholders markdown.ts writes (<span class="math">TeX</span>)
// with KaTeX. KaTeX and its stylesheet and fonts are loaded on the first
// page that has math (not part of the first screen); until then, and for TeX
// KaTeX cannot parse, the TeX stays readable as text.
type Katex = typeof import('katex').default
let katex: Promise<Katex> | null = null
function load(): Promise<Katex> {
  if (!katex) katex = Promise.all([import('katex'), import('katex/dist/katex.min.css')]).then(([m]) => m.default)
  return katex
}

/** Renders the math placeholders under root that are not rendered yet. */
export async function typeset(root: HTMLElement | null | undefined): Promise<void> {
  if (!root) return
  const pending = Array.from(root.querySelectorAll<HTMLElement>('span.math:not([data-typeset])'))
  if (!pending.length) return
  const k = await load()
  for (const el of pending) {
    if (!el.isConnected || el.dataset.typeset) continue
    const tex = el.textContent ?? ''
    el.dataset.typeset = '1'
    el.title = tex
    try {
      // render builds the DOM itself (styles through the CSSOM, which the page's CSP allows).
      k.render(tex, el, { displayMode: el.dataset.display === '1', throwOnError: true, output: 'htmlAndMathml' })
    } catch {
      el.textContent = tex
      el.classList.add('math-error')
    }
  }
}
