import { createRouter, createWebHistory } from 'vue-router'
import { token } from './api'
import LoginView from './views/LoginView.vue'
import ChatView from './views/ChatView.vue'

export const router = createRouter({
  history: createWebHistory(),
  routes: [
    { path: '/', redirect: '/chat' },
    { path: '/login', component: LoginView, meta: { public: true } },
    { path: '/chat/:threadId?', component: ChatView },
    { path: '/knowledge', component: () => import('./views/KnowledgeView.vue') },
    { path: '/knowledge/:kbId', component: () => import('./views/KBDetailView.vue') },
    { path: '/agents', component: () => import('./views/AgentsView.vue') },
    { path: '/agents/new', component: () => import('./views/AgentFormView.vue') },
    { path: '/agents/:slug/edit', component: () => import('./views/AgentFormView.vue') },
    { path: '/admin/:tab(users|providers|settings|mcp|skills|dashboard)?', component: () => import('./views/AdminView.vue') },
    { path: '/evaluation', component: () => import('./views/EvalSuitesView.vue') },
    { path: '/settings/api-keys', component: () => import('./views/ApiKeysView.vue') },
    { path: '/auth/cli/authorize', component: () => import('./views/CliAuthorizeView.vue') },
    { path: '/auth/oidc/callback', component: () => import('./views/OidcCallbackView.vue'), meta: { public: true } },
    { path: '/:rest(.*)*', redirect: '/chat' },
  ],
})

router.beforeEach((to) => {
  if (!to.meta.public && !token.value) return { path: '/login', query: to.fullPath !== '/chat' ? { next: to.fullPath } : {} }
})
