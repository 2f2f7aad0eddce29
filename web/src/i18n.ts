// UI strings in Chinese (the original is Chinese-first) and English. The
// language follows the browser unless the user picked one (localStorage).
import { ref } from 'vue'

const zh = {
  appName: '语析', chat: '对话', knowledge: '知识库', agents: '智能体', logout: '退出登录',
  theme: '切换深色/浅色', language: 'English',
  firstRunTitle: '创建超级管理员', firstRunHelp: '这是首次启动：创建第一个账号，它将拥有全部权限。',
  loginTitle: '登录', uid: '账号', password: '密码', username: '显示名称（可选）',
  create: '创建', signIn: '登录', loginFailed: '账号或密码不正确。', retryAfter: '尝试次数过多，请在 {n} 秒后重试。',
  networkError: '无法连接服务器。', passwordTooShort: '密码至少 8 位。',
  threads: '对话列表', newThread: '新建对话', agent: '智能体', noThreads: '还没有对话。选择一个智能体开始。',
  send: '发送', stop: '停止', placeholder: '输入消息，Enter 发送，Shift+Enter 换行',
  queued: '排队中', position: '第 {n} 位', cancel: '取消', sendNow: '立即发送', running: '运行中',
  queuePaused: '上一次运行未完成，队列已暂停。', continueQueue: '继续队列',
  toolCall: '工具调用', args: '参数', result: '结果', cancelled: '已停止', failed: '失败',
  askTitle: '需要你的回答', other: '其他', submitAnswer: '提交回答', tokens: '{n} tokens',
  selectThread: '选择或新建一个对话。', untitled: '新对话',
  kbList: '知识库', kbCreate: '新建知识库', kbName: '名称', kbDesc: '描述', kbFiles: '文件',
  noKBs: '还没有知识库。新建一个并上传文档。', upload: '上传文件', fileName: '文件名', status: '状态',
  chunks: '分块', back: '返回', noFiles: '还没有文件。上传 Markdown、PDF、Word 等文档。',
  st_uploaded: '已上传', st_parsing: '解析中', st_parsed: '已解析', st_indexing: '索引中', st_indexed: '已索引',
  st_error_parsing: '解析失败', st_error_indexing: '索引失败', uploading: '上传中 {n}%',
  agentList: '智能体', isDefault: '默认', setDefault: '设为默认', description: '描述',
}
type Strings = typeof zh
const en: Strings = {
  appName: 'Yuxi', chat: 'Chat', knowledge: 'Knowledge', agents: 'Agents', logout: 'Sign out',
  theme: 'Toggle dark/light', language: '中文',
  firstRunTitle: 'Create the superadmin', firstRunHelp: 'First start: create the first account; it has every permission.',
  loginTitle: 'Sign in', uid: 'Account', password: 'Password', username: 'Display name (optional)',
  create: 'Create', signIn: 'Sign in', loginFailed: 'Wrong account or password.', retryAfter: 'Too many attempts. Try again in {n} seconds.',
  networkError: 'Cannot reach the server.', passwordTooShort: 'Use at least 8 characters.',
  threads: 'Threads', newThread: 'New thread', agent: 'Agent', noThreads: 'No threads yet. Pick an agent to start.',
  send: 'Send', stop: 'Stop', placeholder: 'Type a message; Enter sends, Shift+Enter adds a line',
  queued: 'Queued', position: 'position {n}', cancel: 'Cancel', sendNow: 'Send now', running: 'Running',
  queuePaused: 'The last run did not finish; the queue is paused.', continueQueue: 'Continue queue',
  toolCall: 'Tool call', args: 'Arguments', result: 'Result', cancelled: 'Stopped', failed: 'Failed',
  askTitle: 'Your answer is needed', other: 'Other', submitAnswer: 'Submit answer', tokens: '{n} tokens',
  selectThread: 'Pick a thread or start a new one.', untitled: 'New thread',
  kbList: 'Knowledge bases', kbCreate: 'New knowledge base', kbName: 'Name', kbDesc: 'Description', kbFiles: 'Files',
  noKBs: 'No knowledge bases yet. Create one and upload documents.', upload: 'Upload files', fileName: 'File', status: 'Status',
  chunks: 'Chunks', back: 'Back', noFiles: 'No files yet. Upload Markdown, PDF, Word and other documents.',
  st_uploaded: 'Uploaded', st_parsing: 'Parsing', st_parsed: 'Parsed', st_indexing: 'Indexing', st_indexed: 'Indexed',
  st_error_parsing: 'Parsing failed', st_error_indexing: 'Indexing failed', uploading: 'Uploading {n}%',
  agentList: 'Agents', isDefault: 'Default', setDefault: 'Make default', description: 'Description',
}

export type Key = keyof Strings
export type Lang = 'zh' | 'en'

function initial(): Lang {
  const saved = localStorage.getItem('yuxi.lang')
  if (saved === 'zh' || saved === 'en') return saved
  return (navigator.language || 'zh').toLowerCase().startsWith('zh') ? 'zh' : 'en'
}

export const lang = ref<Lang>(initial())
document.documentElement.lang = lang.value === 'zh' ? 'zh-CN' : 'en'

export function setLang(l: Lang) {
  lang.value = l
  localStorage.setItem('yuxi.lang', l)
  document.documentElement.lang = l === 'zh' ? 'zh-CN' : 'en'
}

export function t(key: Key, vars?: Record<string, string | number>): string {
  let s = (lang.value === 'zh' ? zh : en)[key] ?? key
  if (vars) for (const [k, v] of Object.entries(vars)) s = s.replace(`{${k}}`, String(v))
  return s
}

export function statusText(status: string): string {
  const k = ('st_' + status) as Key
  return k in zh ? t(k) : status
}
