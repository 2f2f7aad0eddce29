// The chat model: history items and live run events folded into one list of
// messages. A run's events are applied by message id, so replaying a run's
// stream from its start (after a reload) rebuilds its answer exactly once.
export interface ToolView { id: string; name: string; args: unknown; result?: string; error?: string; status: string }
export interface Msg {
  key: string
  role: 'human' | 'ai'
  content: string
  tools: ToolView[]
  runId?: string
  live?: boolean
  status?: string
  error?: string
  tokens?: number
  requestId?: string
  /** Files that came with a human message (its attachments). */
  files?: FileCard[]
  /** Files the agent presented (present_artifacts) in this message's tool calls. */
  artifacts?: Artifact[]
}
/** One presented file of the thread state's artifact_items. */
export interface Artifact { path: string; run_id: string; tool_call_id: string; presented_at: string }
/** A passage a query_kb call returned: the answer's sources. */
export interface Citation { kbId: string; fileId: string; chunkId: string; source: string; content: string }

/** The passages of a message's query_kb results, one per chunk. */
export function citations(m: Msg): Citation[] {
  const out: Citation[] = []
  const seen = new Set<string>()
  for (const tc of m.tools) {
    if (tc.name !== 'query_kb' || tc.result === undefined) continue
    let r: any = tc.result
    if (typeof r === 'string') { try { r = JSON.parse(r) } catch { continue } }
    for (const x of r?.results ?? []) {
      const kbId = x.kb_id || r.kb_id
      if (!kbId || !x.file_id || seen.has(x.id)) continue
      seen.add(x.id)
      out.push({ kbId, fileId: x.file_id, chunkId: x.id ?? '', source: x.metadata?.source || x.file_id, content: x.content ?? '' })
    }
  }
  return out
}

/** Puts each presented file on the message whose tool call presented it. */
export function placeArtifacts(msgs: Msg[], items: Artifact[]) {
  for (const m of msgs) {
    if (m.role !== 'ai') continue
    const mine = items.filter((a) => m.tools.some((tc) => tc.id === a.tool_call_id))
    if (mine.length || m.artifacts?.length) m.artifacts = mine
  }
}
export interface FileCard { file_id: string; file_name: string; file_size: number; path: string; artifact_url: string; request_id?: string }
export interface Question {
  question_id: string
  question: string
  options: { label: string; value: string; description?: string }[]
  multi_select: boolean
  allow_other: boolean
}

/** The approval part of a `human_approval_required` interrupt. */
export interface ApprovalRequest {
  action_requests: { name: string; args: unknown; description: string; tool_call_id: string }[]
  review_configs: { action_name: string; allowed_decisions: string[] }[]
  expires_at: string
}

export function fromHistory(items: any[], skipRun?: string): Msg[] {
  const out: Msg[] = []
  for (const h of items) {
    if (h.type === 'human') {
      out.push({ key: 'h' + h.id, role: 'human', content: h.content, tools: [], runId: h.run_id ?? undefined, requestId: h.request_id ?? undefined })
    } else if (h.type === 'ai') {
      if (skipRun && h.run_id === skipRun) continue // the run's stream replays it
      out.push({
        key: 'h' + h.id, role: 'ai', content: h.content ?? '', runId: h.run_id ?? undefined,
        status: h.error_type === 'cancelled' ? 'cancelled' : undefined,
        tools: (h.tool_calls ?? []).map((c: any) => ({
          id: c.id, name: c.name, args: c.args, status: c.status,
          result: c.tool_call_result?.content, error: c.error_message ?? undefined,
        })),
      })
    }
  }
  return out
}

/** RunState folds one run's events into messages appended to `msgs`. */
export class RunState {
  byMessage = new Map<string, Msg>()
  questions: Question[] | null = null
  approval: ApprovalRequest | null = null
  ended: string | null = null
  error: string | null = null
  constructor(public runId: string, private msgs: Msg[]) {}

  private msg(id: string): Msg {
    let m = this.byMessage.get(id)
    if (!m) {
      m = { key: 'live:' + id, role: 'ai', content: '', tools: [], runId: this.runId, live: true }
      this.msgs.push(m)
      m = this.msgs[this.msgs.length - 1] // the reactive proxy
      this.byMessage.set(id, m)
    }
    return m
  }

  private tool(id: string): ToolView | undefined {
    for (const m of this.byMessage.values()) {
      const tv = m.tools.find((x) => x.id === id)
      if (tv) return tv
    }
  }

  apply(event: string, data: any) {
    const p = data?.payload ?? {}
    switch (event) {
      case 'messages':
        for (const item of p.items ?? []) {
          const se = item?.stream_event
          if (!se?.message_id) continue
          const m = this.msg(se.message_id)
          if (se.type === 'message_delta' && se.content) m.content += se.content
          else if (se.type === 'tool_call' || se.type === 'tool_call_delta') {
            let tv = m.tools.find((x) => x.id === se.tool_call_id)
            if (!tv) { m.tools.push({ id: se.tool_call_id, name: se.name, args: {}, status: 'running' }); tv = m.tools[m.tools.length - 1] }
            if (se.type === 'tool_call') tv.args = se.args
          }
        }
        break
      case 'custom': {
        const c = p.chunk ?? {}
        if (p.name === 'yuxi.retry') {
          for (const [id, m] of [...this.byMessage]) {
            if (id.startsWith(c.discard_message_prefix) && id !== c.current_message_id) {
              this.byMessage.delete(id)
              const i = this.msgs.indexOf(m)
              if (i >= 0) this.msgs.splice(i, 1)
            }
          }
        } else if (p.name === 'yuxi.stream_event') {
          const d = c.event?.data ?? {}
          const tv = this.tool(d.tool_call_id)
          if (tv && d.event === 'tool-finished') {
            if (d.error != null) { tv.status = 'error'; tv.error = d.error }
            else if (d.interrupt != null) { tv.status = 'interrupted' }
            else { tv.status = 'success'; tv.result = d.output ?? undefined }
          }
        }
        break
      }
      case 'interrupt':
        if (p.chunk?.approval?.action_requests?.length) this.approval = p.chunk.approval
        else if (p.chunk?.questions?.length) this.questions = p.chunk.questions
        break
      case 'error':
        if (!p.retryable) this.error = p.chunk?.error_message ?? data?.message ?? 'error'
        break
      case 'end':
        this.ended = p.status ?? 'completed'
        for (const m of this.byMessage.values()) {
          for (const tv of m.tools) if (tv.status === 'running') tv.status = this.ended === 'interrupted' ? 'interrupted' : this.ended ?? 'cancelled'
          m.live = false; if (this.ended !== 'completed' && this.ended !== 'interrupted') m.status = this.ended ?? undefined }
        break
    }
  }
}
