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
  approvalTitle: '工具调用等待你的批准', approvalHelp: '批准后工具才会运行；{at} 前有效。', approve: '批准', reject: '拒绝',
  approved: '已批准', rejected: '已拒绝', rejectNote: '拒绝理由（可选，告诉模型）', submitDecisions: '提交决定',
  ts_running: '运行中', ts_success: '成功', ts_error: '出错', ts_interrupted: '等待中', ts_cancelled: '已停止', ts_pending: '等待中',
  messages: '消息', open: '打开', files: '文件', refresh: '刷新', close: '关闭', noFilesYet: '这个对话还没有文件。', rendered: '渲染', source: '源码', download: '下载',
  truncated: '文件较大，只显示开头部分。', pdfNoViewer: '浏览器无法内嵌显示 PDF，请下载查看。', attach: '添加附件', attaching: '上传中…', removeAttachment: '移除附件 {name}', admin: '系统管理', admin_users: '用户与部门', admin_providers: '模型供应商', admin_settings: '系统设置',
  users: '用户', departments: '部门', role: '角色', department: '部门', lastLogin: '最近登录', delete: '删除', deleteConfirm: '删除“{name}”？此操作不可撤销。',
  userCreate: '新建用户', deptCreate: '新建部门', deptHelp: '每个部门创建时同时创建它的管理员账号。', deptAdmin: '部门管理员账号', deptAdminPassword: '部门管理员密码',
  role_superadmin: '超级管理员', role_admin: '管理员', role_user: '用户', saved: '已保存。', noChanges: '没有改动。',
  baseUrl: '接口地址', models: '模型', enabled: '已启用', enable: '启用', disable: '停用', noApiKey: '无密钥', providerCreate: '添加供应商',
  providerHelp: 'OpenAI 兼容接口；密钥加密保存，之后不再显示。', providerId: '供应商标识', apiKeyField: 'API 密钥', onePerLine: '每行一项', loadingOlder: '正在加载更早的消息…', scrollForOlder: '向上滚动加载更早的消息', agentCreate: '新建智能体', agentEdit: '编辑智能体', agentSlug: '标识（可选）', agentSlugHelp: '小写字母、数字、- 和 _；留空自动生成。', commaList: '多个值用逗号分隔。', save: '保存', edit: '编辑', actions: '操作', apiKeys: 'API 密钥', apiKeysHelp: '用 API 密钥从脚本或 CLI 调用本平台。密钥只在创建时显示一次。', createKey: '创建密钥',
  expiresAt: '过期时间', secretOnce: '请立即复制此密钥：关闭页面后将无法再次查看。', copy: '复制', copied: '已复制',
  keyPrefix: '前缀', lastUsed: '最近使用', revoke: '吊销', revokeConfirm: '吊销密钥“{name}”？使用它的程序将立即失效。',
  revoked: '已吊销', disabled: '已停用', expired: '已过期', active: '有效', noKeys: '还没有 API 密钥。',
  cliTitle: '授权命令行登录', cliHelp: '核对命令行显示的代码，确认是你本人发起后批准。批准后命令行会获得一个新的 API 密钥。',
  cliCode: '验证码', cliCheck: '查询', cliKeyName: '密钥名称', cliApprove: '批准登录', cliDone: '已批准，可以回到命令行了。',
  cliNotFound: '找不到这个验证码，或它已过期。', cli_pending: '等待批准', cli_approved: '已批准', cli_consumed: '已使用', cli_expired: '已过期',
  oidcTitle: '单点登录', oidcWorking: '正在完成登录…', oidcFailed: '单点登录未能完成，请重新登录。', backToLogin: '返回登录页', ssoLogin: '使用 {name} 登录',
  moveTo: '移动到文件夹', move: '移动', moved: '已移动 {n} 个文件。', saveToWorkspace: '保存到工作区', savedTo: '已保存到 {path}',
  date: '日期',
  autoIndex: '解析后自动索引', editOnlyParsed: '只有已解析、尚未索引的文件可以编辑（上传时取消“解析后自动索引”）。',
  kbtab_eval: '评估', kbtab_graph: '图谱与导图', graph: '知识图谱', mindmap: '思维导图', gs_not_configured: '未配置', gs_empty: '空', gs_building: '构建中', gs_done: '已完成', gs_partial: '部分完成', extractorModel: '抽取模型', buildGraph: '构建图谱', graphSearch: '实体', show: '显示', graphTruncated: '图谱较大，只显示一部分。', graphEmpty: '还没有图谱。构建后这里会显示实体和关系。', regenerate: '重新生成', generate: '生成', mindmapEmpty: '还没有思维导图。', datasets: '评估数据集', items: '条目', goldData: '标注', goldChunks: '标准片段', goldAnswers: '标准答案', noDatasets: '还没有数据集。', datasetName: '数据集名称', uploadDataset: '上传数据集', datasetHelp: 'JSONL：每行 {"query", "gold_chunk_ids", "gold_answer"}。', evalRuns: '评估运行', dataset: '数据集', startRun: '开始评估', progress: '进度', overallScore: '总分', gate: '门禁', noRuns: '还没有评估运行。', rs_running: '运行中', rs_completed: '已完成', rs_failed: '失败', rs_cancelled: '已取消', rs_pending: '等待中', metricHistory: '指标历史', schedules: '定时评估', noSchedules: '还没有定时评估。', gateMetric: '门禁指标', gateTolerance: '允许下降',
  artifacts: '生成的文件', sources: '引用来源', admin_mcp: 'MCP 服务', admin_skills: '技能', admin_dashboard: '仪表盘', dashActive: '进行中对话', dashConversations: '对话总数', dashDailyUsers: '每日活跃用户', dashRange: '时间范围', dashSatisfaction: '满意度', dashSeries: '调用统计', dashToolCalls: '工具调用', dashTopTools: '最常用工具', dashTotals: '合计 {total} · 平均 {avg} · 峰值 {peak}', dash_models: '模型调用', dash_agents: '智能体对话', dash_tokens: 'Token 用量', dash_tools: '工具调用', dash_14hours: '最近 14 小时', dash_14days: '最近 14 天', dash_14weeks: '最近 14 周', dependencies: '依赖', editReindexes: '保存后文件保持“已解析”，再点“重新索引”使用新内容。', folderName: '文件夹名称', newFolder: '新建文件夹', uploadTo: '上传到文件夹', headers: '请求头', headersHelp: '每行一个“名称: 值”；值加密保存，之后不再显示。', markdownSource: 'Markdown 源码', mcpCreate: '添加 MCP 服务', noMcp: '还没有 MCP 服务。', noSkills: '还没有技能。上传 SKILL.md 或 zip。', nothingToPick: '没有可选项。', queryHits: '{n} 条结果，{ms} 毫秒', queryTest: '检索测试', queryText: '查询内容', refreshTools: '刷新工具', tools: '工具', transport: '传输方式', reindex: '重新索引', reparse: '重新解析', reparseQueued: '{n} 个文件已重新排队解析。', reindexQueued: '{n} 个文件已重新排队索引。', runQuery: '检索', score: '得分', select: '选择', shareRead: '谁可以使用这个知识库', shareUsers: '用户账号', share_private: '仅自己', share_global: '所有人', share_department: '指定部门', share_user: '指定用户', kbtab_files: '文件', kbtab_query: '检索测试', kbtab_share: '共享设置', skillConfirm: '确认安装', skillDraft: '待安装的技能', skillInstalled: '已安装：{name}', skillUpload: '上传技能', skillsHelp: '技能是给智能体的说明书（SKILL.md），可带脚本和依赖。', systemDefault: '系统默认模型',
  kbType: '类型', kbConnection: '连接参数', kbReadOnlyHelp: '只读：不能上传或索引文件，检索由外部服务回答。', secretHelp: '加密保存，之后不再显示。', kbt_milvus: '文档知识库', kbt_dify: 'Dify 数据集', kbt_notion: 'Notion 页面', kbf_dify_api_url: 'Dify API 地址', kbf_dify_token: '数据集 API 密钥', kbf_dify_dataset_id: '数据集 ID', kbf_notion_api_url: 'Notion API 地址', kbf_notion_token: '集成令牌', kbf_notion_version: 'Notion-Version', kbReadOnly: '只读知识库（{type}）：文档由外部服务管理，这里可以做检索测试和共享设置。',
  generationStarted: '已开始生成数据集。', generationResumed: '已恢复生成。', resume: '恢复', uploaded: '已上传', questionCount: '题目数量', generatorModel: '生成模型', generateDataset: '生成数据集',
  evaluation: '评估', suites: '智能体评估', suiteCreate: '新建评估套件', suitesHelp: '评估套件用一组输入测试一个智能体：每条可以要求回答包含某段文字，运行后逐条查看输出和检查结果。', suiteInput: '输入', mustContain: '回答须包含（可选）', addItem: '添加条目', noSuites: '还没有评估套件。', suiteOutput: '输出', checks: '检查', passed: '通过', notPassed: '未通过',
  generationCancelling: '已请求取消：当前批次完成后停止，可以再恢复。', cancelling: '取消中…', graphLabels: '标签（{n}）', filter: '筛选', allLabels: '全部', testTool: '测试', argumentsJson: '参数（JSON 对象）', callTool: '调用', toolError: '工具返回错误', toolOk: '调用成功', invalidJson: 'JSON 无效：{err}', argsObject: '参数必须是一个 JSON 对象。', kbEditSettings: '编辑设置', secretKeep: '保持 ******** 不变即沿用已保存的密钥；输入新值则替换。', checkType: '检查类型', check_regex: '正则匹配', check_json_schema: 'JSON Schema', check_judge: '评审提示', checkRegexHint: '正则表达式，回答须匹配', checkSchemaHint: 'JSON Schema：回答须是符合它的 JSON', checkJudgeHint: '评审标准：评审模型按它给回答打 0–1 分', threshold: '及格分', addCheck: '添加检查', judgeModel: '评审模型', providerEdit: '编辑供应商 {id}', apiKeyKeep: '留空则保留已保存的密钥。',
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
  approvalTitle: 'A tool call waits for your approval', approvalHelp: 'The tool runs only once approved; valid until {at}.', approve: 'Approve', reject: 'Reject',
  approved: 'Approved', rejected: 'Rejected', rejectNote: 'Reason for rejecting (optional, told to the model)', submitDecisions: 'Submit decisions',
  ts_running: 'Running', ts_success: 'Done', ts_error: 'Error', ts_interrupted: 'Waiting', ts_cancelled: 'Stopped', ts_pending: 'Waiting',
  messages: 'Messages', open: 'Open', files: 'Files', refresh: 'Refresh', close: 'Close', noFilesYet: 'This thread has no files yet.', rendered: 'Rendered', source: 'Source', download: 'Download',
  truncated: 'A large file: only its beginning is shown.', pdfNoViewer: 'The browser cannot show the PDF inline; download it.', attach: 'Attach a file', attaching: 'Uploading…', removeAttachment: 'Remove attachment {name}', admin: 'Administration', admin_users: 'Users & departments', admin_providers: 'Model providers', admin_settings: 'System settings',
  users: 'Users', departments: 'Departments', role: 'Role', department: 'Department', lastLogin: 'Last sign-in', delete: 'Delete', deleteConfirm: 'Delete "{name}"? This cannot be undone.',
  userCreate: 'New user', deptCreate: 'New department', deptHelp: 'A department is created with its administrator account.', deptAdmin: 'Department admin account', deptAdminPassword: 'Department admin password',
  role_superadmin: 'Superadmin', role_admin: 'Admin', role_user: 'User', saved: 'Saved.', noChanges: 'Nothing changed.',
  baseUrl: 'Base URL', models: 'Models', enabled: 'Enabled', enable: 'Enable', disable: 'Disable', noApiKey: 'No key', providerCreate: 'Add provider',
  providerHelp: 'OpenAI-compatible API; the key is stored encrypted and never shown again.', providerId: 'Provider id', apiKeyField: 'API key', onePerLine: 'One per line', loadingOlder: 'Loading earlier messages…', scrollForOlder: 'Scroll up for earlier messages', agentCreate: 'New agent', agentEdit: 'Edit agent', agentSlug: 'Slug (optional)', agentSlugHelp: 'Lower-case letters, digits, - and _; empty makes one.', commaList: 'Separate values with commas.', save: 'Save', edit: 'Edit', actions: 'Actions', apiKeys: 'API keys', apiKeysHelp: 'Use an API key to call this platform from scripts or the CLI. A key is shown once, when it is created.', createKey: 'Create key',
  expiresAt: 'Expires', secretOnce: 'Copy this key now: it will not be shown again.', copy: 'Copy', copied: 'Copied',
  keyPrefix: 'Prefix', lastUsed: 'Last used', revoke: 'Revoke', revokeConfirm: 'Revoke the key "{name}"? Programs using it stop working at once.',
  revoked: 'Revoked', disabled: 'Disabled', expired: 'Expired', active: 'Active', noKeys: 'No API keys yet.',
  cliTitle: 'Authorize a CLI login', cliHelp: 'Check the code your terminal shows and approve it if you started this login. The CLI then receives a new API key.',
  cliCode: 'Code', cliCheck: 'Look up', cliKeyName: 'Key name', cliApprove: 'Approve login', cliDone: 'Approved: you can go back to the terminal.',
  cliNotFound: 'No login with this code, or it expired.', cli_pending: 'Waiting for approval', cli_approved: 'Approved', cli_consumed: 'Used', cli_expired: 'Expired',
  oidcTitle: 'Single sign-on', oidcWorking: 'Finishing sign-in…', oidcFailed: 'Single sign-on did not complete. Please sign in again.', backToLogin: 'Back to sign-in', ssoLogin: 'Sign in with {name}',
  moveTo: 'Move into folder', move: 'Move', moved: '{n} files moved.', saveToWorkspace: 'Save to workspace', savedTo: 'Saved to {path}',
  date: 'Date',
  autoIndex: 'Index after parsing', editOnlyParsed: 'Only a parsed file not yet indexed can be edited (upload it with "Index after parsing" off).',
  kbtab_eval: 'Evaluation', kbtab_graph: 'Graph & mind map', graph: 'Knowledge graph', mindmap: 'Mind map', gs_not_configured: 'Not configured', gs_empty: 'Empty', gs_building: 'Building', gs_done: 'Built', gs_partial: 'Partly built', extractorModel: 'Extractor model', buildGraph: 'Build graph', graphSearch: 'Entity', show: 'Show', graphTruncated: 'A large graph: only part of it is shown.', graphEmpty: 'No graph yet. Once built, entities and relations show here.', regenerate: 'Regenerate', generate: 'Generate', mindmapEmpty: 'No mind map yet.', datasets: 'Datasets', items: 'Items', goldData: 'Gold data', goldChunks: 'gold chunks', goldAnswers: 'gold answers', noDatasets: 'No datasets yet.', datasetName: 'Dataset name', uploadDataset: 'Upload dataset', datasetHelp: 'JSONL: one {"query", "gold_chunk_ids", "gold_answer"} a line.', evalRuns: 'Runs', dataset: 'Dataset', startRun: 'Start run', progress: 'Progress', overallScore: 'Overall score', gate: 'Gate', noRuns: 'No runs yet.', rs_running: 'Running', rs_completed: 'Completed', rs_failed: 'Failed', rs_cancelled: 'Cancelled', rs_pending: 'Pending', metricHistory: 'Metric history', schedules: 'Schedules', noSchedules: 'No schedules yet.', gateMetric: 'Gate metric', gateTolerance: 'Tolerance',
  artifacts: 'Presented files', sources: 'Sources', admin_mcp: 'MCP servers', admin_skills: 'Skills', admin_dashboard: 'Dashboard', dashActive: 'Active conversations', dashConversations: 'Conversations', dashDailyUsers: 'Daily active users', dashRange: 'Range', dashSatisfaction: 'Satisfaction', dashSeries: 'Calls by', dashToolCalls: 'Tool calls', dashTopTools: 'Most used tools', dashTotals: 'Total {total} · average {avg} · peak {peak}', dash_models: 'Model calls', dash_agents: 'Agent conversations', dash_tokens: 'Tokens', dash_tools: 'Tool calls', dash_14hours: 'Last 14 hours', dash_14days: 'Last 14 days', dash_14weeks: 'Last 14 weeks', dependencies: 'Dependencies', editReindexes: 'The file stays parsed after saving; Re-index it to use the new text.', folderName: 'Folder name', newFolder: 'New folder', uploadTo: 'Upload into folder', headers: 'Headers', headersHelp: 'One "Name: value" per line; values are stored encrypted and never shown again.', markdownSource: 'Markdown source', mcpCreate: 'Add an MCP server', noMcp: 'No MCP servers yet.', noSkills: 'No skills yet. Upload a SKILL.md or a zip.', nothingToPick: 'Nothing to pick.', queryHits: '{n} results in {ms} ms', queryTest: 'Query test', queryText: 'Query', refreshTools: 'Refresh tools', tools: 'Tools', transport: 'Transport', reindex: 'Re-index', reparse: 'Re-parse', reparseQueued: '{n} files queued for parsing again.', reindexQueued: '{n} files queued for indexing again.', runQuery: 'Search', score: 'score', select: 'Select', shareRead: 'Who may use this knowledge base', shareUsers: 'User accounts', share_private: 'Only me', share_global: 'Everyone', share_department: 'Chosen departments', share_user: 'Chosen users', kbtab_files: 'Files', kbtab_query: 'Query test', kbtab_share: 'Sharing', skillConfirm: 'Install', skillDraft: 'Skill to install', skillInstalled: 'Installed: {name}', skillUpload: 'Upload skill', skillsHelp: 'Skills are instructions for agents (SKILL.md), with optional scripts and dependencies.', systemDefault: 'System default model',
  kbType: 'Type', kbConnection: 'Connection', kbReadOnlyHelp: 'Read-only: no upload or indexing; queries are answered by the remote service.', secretHelp: 'Stored encrypted; never shown again.', kbt_milvus: 'Document knowledge base', kbt_dify: 'Dify dataset', kbt_notion: 'Notion pages', kbf_dify_api_url: 'Dify API URL', kbf_dify_token: 'Dataset API key', kbf_dify_dataset_id: 'Dataset ID', kbf_notion_api_url: 'Notion API URL', kbf_notion_token: 'Integration token', kbf_notion_version: 'Notion-Version', kbReadOnly: 'Read-only knowledge base ({type}): its documents live in the remote service; test queries and sharing are here.',
  generationStarted: 'Dataset generation started.', generationResumed: 'Generation resumed.', resume: 'Resume', uploaded: 'Uploaded', questionCount: 'Questions', generatorModel: 'Generator model', generateDataset: 'Generate dataset',
  evaluation: 'Evaluation', suites: 'Agent evaluation', suiteCreate: 'New suite', suitesHelp: 'A suite tests an agent on a list of inputs: each may require the answer to contain a text; a run shows every output and its checks.', suiteInput: 'Input', mustContain: 'Answer must contain (optional)', addItem: 'Add item', noSuites: 'No suites yet.', suiteOutput: 'Output', checks: 'Checks', passed: 'Passed', notPassed: 'Not passed',
  generationCancelling: 'Cancel requested: the generation stops after its current batch and can be resumed.', cancelling: 'Cancelling…', graphLabels: 'Labels ({n})', filter: 'Filter', allLabels: 'All', testTool: 'Test', argumentsJson: 'Arguments (a JSON object)', callTool: 'Call', toolError: 'The tool answered an error', toolOk: 'Call succeeded', invalidJson: 'Invalid JSON: {err}', argsObject: 'The arguments must be a JSON object.', kbEditSettings: 'Edit settings', secretKeep: 'Leave ******** as it is to keep the stored secret; type a new one to replace it.', checkType: 'Check type', check_regex: 'Regex', check_json_schema: 'JSON schema', check_judge: 'Judge prompt', checkRegexHint: 'A regular expression the answer must match', checkSchemaHint: 'A JSON schema: the answer must be JSON valid against it', checkJudgeHint: 'A criterion the judge model scores the answer on, 0–1', threshold: 'Pass mark', addCheck: 'Add check', judgeModel: 'Judge model', providerEdit: 'Edit provider {id}', apiKeyKeep: 'Leave empty to keep the stored key.',
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

export function toolStatusText(status: string): string {
  const k = ('ts_' + status) as Key
  return k in zh ? t(k) : status
}

// orText is the string of key when there is one, else fallback (a name the server gave).
export function orText(key: string, fallback: string): string {
  return key in zh ? t(key as Key) : fallback
}

export function statusText(status: string): string {
  const k = ('st_' + status) as Key
  return k in zh ? t(k) : status
}
