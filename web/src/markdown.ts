// Markdown rendering: markdown-it (HTML in the source is escaped) with
// highlight.js core and a few registered languages to keep the bundle small.
import MarkdownIt from 'markdown-it'
import hljs from 'highlight.js/lib/core'
import bash from 'highlight.js/lib/languages/bash'
import go from 'highlight.js/lib/languages/go'
import javascript from 'highlight.js/lib/languages/javascript'
import json from 'highlight.js/lib/languages/json'
import python from 'highlight.js/lib/languages/python'
import sql from 'highlight.js/lib/languages/sql'
import typescript from 'highlight.js/lib/languages/typescript'
import yaml from 'highlight.js/lib/languages/yaml'

for (const [name, lang] of Object.entries({ bash, go, javascript, json, python, sql, typescript, yaml })) hljs.registerLanguage(name, lang)
hljs.registerAliases(['sh', 'shell'], { languageName: 'bash' })
hljs.registerAliases(['js'], { languageName: 'javascript' })
hljs.registerAliases(['ts'], { languageName: 'typescript' })
hljs.registerAliases(['py'], { languageName: 'python' })

const md = new MarkdownIt({
  html: false,
  linkify: true,
  breaks: false,
  highlight(code: string, lang: string): string {
    if (lang && hljs.getLanguage(lang)) {
      try { return `<pre><code class="hljs">${hljs.highlight(code, { language: lang, ignoreIllegals: true }).value}</code></pre>` } catch { /* plain */ }
    }
    return `<pre><code class="hljs">${md.utils.escapeHtml(code)}</code></pre>`
  },
})
// Links open outside the app.
type Rule = (tokens: any[], idx: number, options: any, env: any, self: any) => string
const defaultLink: Rule = md.renderer.rules.link_open ?? ((tokens, idx, options, _env, self) => self.renderToken(tokens, idx, options))
md.renderer.rules.link_open = ((tokens, idx, options, env, self) => {
  tokens[idx].attrSet('target', '_blank')
  tokens[idx].attrSet('rel', 'noopener noreferrer')
  return defaultLink(tokens, idx, options, env, self)
}) as Rule

// Math: $…$ and \\(…\\) inline, $$…$$ and \\[…\\] as blocks. The TeX is
// written as text into a .math placeholder (readable as is); math.ts
// typesets the placeholders with KaTeX, loaded on demand, so the first
// screen does not carry it.
type InlineState = { src: string; pos: number; posMax: number; push: (type: string, tag: string, nesting: number) => any }
function mathInline(state: InlineState, silent: boolean): boolean {
  const src = state.src
  const start = state.pos
  let open = '', close = ''
  if (src.startsWith('$$', start)) { open = '$$'; close = '$$' }
  else if (src[start] === '$') { open = '$'; close = '$' }
  else if (src.startsWith('\\(', start)) { open = '\\('; close = '\\)' }
  else if (src.startsWith('\\[', start)) { open = '\\['; close = '\\]' }
  else return false
  let end = start + open.length
  for (;;) {
    end = src.indexOf(close, end)
    if (end < 0 || end >= state.posMax) return false
    if (src[end - 1] !== '\\' || open.startsWith('\\')) break
    end++
  }
  const tex = src.slice(start + open.length, end)
  if (!tex.trim()) return false
  // "$5 and $6": a single dollar needs TeX right after it and no digit after the closing one.
  if (open === '$' && (/^\s|\s$/.test(tex) || /\d/.test(src[end + 1] ?? ''))) return false
  if (!silent) {
    const tok = state.push('math', 'span', 0)
    tok.content = tex
    tok.info = open === '$$' || open === '\\[' ? 'block' : 'inline'
  }
  state.pos = end + close.length
  return true
}
md.inline.ruler.before('escape', 'math', mathInline as any)
md.renderer.rules.math = (tokens, idx) => {
  const tok = tokens[idx]
  const display = tok.info === 'block'
  return `<span class="math${display ? ' math-display' : ''}" data-display="${display ? 1 : 0}">${md.utils.escapeHtml(tok.content)}</span>`
}

/** Whether rendered HTML has math placeholders for math.ts. */
export const hasMath = (html: string) => html.includes('class="math')

export function renderMarkdown(src: string): string {
  return md.render(src)
}
