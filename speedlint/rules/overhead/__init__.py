"""overhead"""
