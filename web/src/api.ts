// The API client. The JWT is kept in localStorage, as the original does: the
// API is the same origin, no token ever goes to another origin or into a URL
// (streams are read with fetch and an Authorization header, not EventSource).
import { ref } from 'vue'

const TOKEN_KEY = 'yuxi.token'
export const token = ref<string | null>(localStorage.getItem(TOKEN_KEY))

export function setToken(v: string | null) {
  token.value = v
  if (v) localStorage.setItem(TOKEN_KEY, v)
  else localStorage.removeItem(TOKEN_KEY)
}

export class ApiError extends Error {
  constructor(public status: number, public code: string, message: string, public retryAfter?: number, public body?: any) {
    super(message)
  }
}

export function authHeaders(): Record<string, string> {
  return token.value ? { Authorization: `Bearer ${token.value}` } : {}
}

export async function api<T = any>(method: string, path: string, body?: unknown): Promise<T> {
  const headers: Record<string, string> = { ...authHeaders() }
  let payload: BodyInit | undefined
  if (body instanceof URLSearchParams || body instanceof FormData) payload = body
  else if (body !== undefined) {
    headers['Content-Type'] = 'application/json'
    payload = JSON.stringify(body)
  }
  let resp: Response
  try {
    resp = await fetch(path, { method, headers, body: payload })
  } catch (e) {
    throw new ApiError(0, 'network_error', String(e))
  }
  const text = await resp.text()
  let data: any = null
  try { data = text ? JSON.parse(text) : null } catch { data = { raw: text } }
  if (!resp.ok) {
    const err = data?.error ?? {}
    let retry = Number(resp.headers.get('Retry-After') || err.retry_after_seconds || data?.retry_after_seconds || 0) || undefined
    if (resp.status === 401 && token.value && !path.startsWith('/api/auth/token')) setToken(null)
    throw new ApiError(resp.status, err.code ?? 'http_' + resp.status, err.message ?? data?.detail ?? resp.statusText, retry, data)
  }
  return data as T
}

/** Upload with progress (fetch has no upload progress). */
export function upload(path: string, form: FormData, onProgress: (pct: number) => void): Promise<any> {
  return new Promise((resolve, reject) => {
    const xhr = new XMLHttpRequest()
    xhr.open('POST', path)
    for (const [k, v] of Object.entries(authHeaders())) xhr.setRequestHeader(k, v)
    xhr.upload.onprogress = (e) => { if (e.lengthComputable) onProgress(Math.round((e.loaded / e.total) * 100)) }
    xhr.onload = () => {
      let data: any = null
      try { data = JSON.parse(xhr.responseText) } catch { /* not JSON */ }
      if (xhr.status >= 200 && xhr.status < 300) resolve(data)
      else reject(new ApiError(xhr.status, data?.error?.code ?? 'http_' + xhr.status, data?.error?.message ?? xhr.statusText))
    }
    xhr.onerror = () => reject(new ApiError(0, 'network_error', 'network error'))
    xhr.send(form)
  })
}
