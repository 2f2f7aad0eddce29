// Server-sent events over fetch (so the token travels in a header). The
// stream is resumed after a network break with Last-Event-ID, and events
// whose id was already seen are dropped, so a reconnect never duplicates.
import { authHeaders } from './api'

export interface SSEEvent { event: string; id: string; data: any }

export interface StreamOptions {
  lastEventId?: string
  signal: AbortSignal
  onEvent: (e: SSEEvent) => void
  /** Stop reading when this returns true for an event (e.g. `end`). */
  isLast?: (e: SSEEvent) => boolean
}

function seqOf(id: string): [number, number] {
  const [a, b] = id.split('-')
  return [Number(a) || 0, Number(b) || 0]
}

function after(id: string, last: string): boolean {
  if (!last) return true
  const [a1, b1] = seqOf(id), [a2, b2] = seqOf(last)
  return a1 > a2 || (a1 === a2 && b1 > b2)
}

export async function streamEvents(url: string, opts: StreamOptions): Promise<void> {
  let last = opts.lastEventId ?? ''
  let delay = 500
  while (!opts.signal.aborted) {
    let done = false
    try {
      const headers: Record<string, string> = { Accept: 'text/event-stream', ...authHeaders() }
      if (last) headers['Last-Event-ID'] = last
      const resp = await fetch(url, { headers, signal: opts.signal })
      if (resp.status >= 400 && resp.status < 500) return // gone or not ours: nothing to resume
      if (!resp.ok || !resp.body) throw new Error('stream ' + resp.status)
      const reader = resp.body.pipeThrough(new TextDecoderStream()).getReader()
      let buf = ''
      delay = 500
      for (;;) {
        const { value, done: eof } = await reader.read()
        if (eof) break
        buf += value
        let i: number
        while ((i = buf.indexOf('\n\n')) >= 0) {
          const block = buf.slice(0, i)
          buf = buf.slice(i + 2)
          const ev: SSEEvent = { event: 'message', id: '', data: null }
          const data: string[] = []
          for (const line of block.split('\n')) {
            if (line.startsWith(':')) continue
            const c = line.indexOf(':')
            const field = c < 0 ? line : line.slice(0, c)
            const val = c < 0 ? '' : line.slice(c + 1).replace(/^ /, '')
            if (field === 'event') ev.event = val
            else if (field === 'data') data.push(val)
            else if (field === 'id') ev.id = val
          }
          if (!data.length) continue
          try { ev.data = JSON.parse(data.join('\n')) } catch { ev.data = data.join('\n') }
          if (ev.id) {
            if (!after(ev.id, last)) continue
            last = ev.id
          }
          opts.onEvent(ev)
          if (opts.isLast?.(ev)) { done = true; break }
        }
        if (done) { reader.cancel().catch(() => {}); break }
      }
      if (done) return
    } catch (e) {
      if (opts.signal.aborted) return
    }
    await new Promise((r) => setTimeout(r, delay))
    delay = Math.min(delay * 2, 5000)
  }
}
